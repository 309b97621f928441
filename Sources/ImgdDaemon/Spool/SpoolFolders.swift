import ImgdCore

#if canImport(Glibc)
import Glibc
#endif

/// The spool's folders: where lists are dropped, and `.claimed/`, `done/` and `failed/` inside it,
/// each held open so files move between them by `renameat` relative to descriptors.
///
/// A class, shared by the spool's owners (``SpoolService`` warms and finishes lists,
/// ``ListClaimer`` claims them, on their own queues): its descriptors never change once open,
/// and every operation on them is a single system call.
final class SpoolFolders: Sendable {
    let path: String
    let spool: Int32
    let claimed: Int32
    let done: Int32
    let failed: Int32

    /// Creates what is missing and opens the four folders.
    init(path: String) throws(SpoolError) {
        self.path = path
        try Self.makeFolders(path)
        var opened: [Int32] = []
        for sub in ["", "/.claimed", "/done", "/failed"] {
            let folder = path + sub
            // No setgid bit in the mode: under RestrictSUIDSGID= such a mkdir fails even when the
            // folder exists. A folder made inside a setgid spool inherits the bit anyway.
            if mkdir(folder, 0o770) != 0, errno != EEXIST {
                let code = errno
                opened.forEach { close($0) }
                throw .cannotCreate(path: folder, errno: code)
            }
            let fd = open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            guard fd >= 0 else {
                let code = errno
                opened.forEach { close($0) }
                throw .cannotCreate(path: folder, errno: code)
            }
            opened.append(fd)
        }
        (spool, claimed, done, failed) = (opened[0], opened[1], opened[2], opened[3])
    }

    deinit {
        for fd in [spool, claimed, done, failed] { close(fd) }
    }

    /// Moves `name` from folder `from` to folder `to`, under `name` or, if that is taken there,
    /// `stem.N.ext`. Returns the name it got, or nil with errno set.
    func move(_ name: String, from: Int32, to: Int32, as target: String) -> String? {
        var candidate = target
        var attempt = 1
        while true {
            if Self.renameNoReplace(from, name, to, candidate) { return candidate }
            guard errno == EEXIST, attempt < 1000 else { return nil }
            attempt += 1
            candidate = Self.numbered(target, attempt)
        }
    }

    /// `a.txt` → `a.2.txt`; `a` → `a.2`.
    static func numbered(_ name: String, _ number: Int) -> String {
        if let dot = name.lastIndex(of: "."), dot != name.startIndex {
            return "\(name[..<dot]).\(number)\(name[dot...])"
        }
        return "\(name).\(number)"
    }

    /// Moves without ever replacing what is at the target (an earlier report or list of the same
    /// name): a hard link, which fails with EEXIST when the name is taken, then the old name
    /// removed. (`renameat2(RENAME_NOREPLACE)` would be one call, but Swift's Glibc module does
    /// not declare it.) A folder cannot be linked: it is renamed after a check, which is racy
    /// only against another process writing into `failed/` under the same name.
    private static func renameNoReplace(_ from: Int32, _ old: String, _ to: Int32, _ new: String) -> Bool {
        if linkat(from, old, to, new, 0) == 0 {
            unlinkat(from, old, 0)
            return true
        }
        guard errno == EPERM else { return false }
        var info = stat()
        if fstatat(to, new, &info, AT_SYMLINK_NOFOLLOW) == 0 {
            errno = EEXIST
            return false
        }
        return renameat(from, old, to, new) == 0
    }

    private static func makeFolders(_ path: String) throws(SpoolError) {
        if let failure = Folders.make(path) { throw .cannotCreate(path: failure.path, errno: failure.errno) }
    }
}
