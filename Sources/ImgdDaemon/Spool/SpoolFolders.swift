import ImgdCore
import Logging

#if canImport(Glibc)
import Glibc
#endif

/// The spool's folders: where lists are dropped, and `.claimed/`, `done/` and `failed/` inside it,
/// each held open so files move between them by `renameat` relative to descriptors.
///
/// The subfolders are the daemon's own: each is opened with `O_NOFOLLOW | O_DIRECTORY` and kept
/// only if its owner is the daemon's user (or root). Members of the spool's group can write in
/// the spool itself, so without the sticky bit one of them can rename a subfolder away and plant
/// a folder or a symlink of their own under its name. Each time a subfolder's descriptor is
/// asked for (before every move into or out of it) its name is checked against the held folder
/// (device and inode); a subfolder that was replaced is made again, with a log line saying what
/// was found: a symlink or any other non-folder is removed, a member's empty folder removed,
/// a member's folder with something in it moved aside to `.NAME.replaced` (hidden, never taken
/// as a list). So a list always lands in the daemon's own `done/` or `failed/`.
///
/// Shared by the spool's owners (``SpoolService`` warms and finishes lists, ``ListClaimer``
/// claims them, on their own queues); the descriptors are behind a mutex. A replaced descriptor is
/// not closed at once (another queue may be in the middle of a call with it): the last 64 are
/// kept open, then closed oldest first.
final class SpoolFolders: Sendable {
    /// A subfolder of the spool, by its name there.
    enum Subfolder: String, CaseIterable, Sendable {
        case claimed = ".claimed"
        case done = "done"
        case failed = "failed"
    }

    let path: String
    let spool: Int32
    private let logger: Logger
    private let held: Locked<Held>

    /// The open subfolders, and descriptors of replaced ones not closed yet.
    private struct Held {
        var folders: [Subfolder: OpenFolder]
        var retired: [Int32] = []
    }

    /// A subfolder's descriptor and the identity of the folder it refers to.
    private struct OpenFolder {
        let fd: Int32
        let device: UInt64
        let inode: UInt64
    }

    /// Replaced descriptors kept open, at most, before the oldest is closed.
    private static let retiredKept = 64

    /// `.claimed/`, checked (and made again if it was replaced) first.
    var claimed: Int32 { current(.claimed) }
    /// `done/`, checked (and made again if it was replaced) first.
    var done: Int32 { current(.done) }
    /// `failed/`, checked (and made again if it was replaced) first.
    var failed: Int32 { current(.failed) }

    /// Creates what is missing and opens the four folders; a subfolder that is not the daemon's
    /// own is replaced (and logged) as at run time.
    init(path: String, logger: Logger) throws(SpoolError) {
        self.path = path
        self.logger = logger
        if let failure = Folders.make(path) { throw .cannotCreate(path: failure.path, errno: failure.errno) }
        // No setgid bit in the mode: under RestrictSUIDSGID= such a mkdir fails even when the
        // folder exists. A folder made inside a setgid spool inherits the bit anyway.
        if mkdir(path, 0o770) != 0, errno != EEXIST { throw .cannotCreate(path: path, errno: errno) }
        spool = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard spool >= 0 else { throw .cannotCreate(path: path, errno: errno) }
        var opened: [Subfolder: OpenFolder] = [:]
        for sub in Subfolder.allCases {
            do {
                opened[sub] = try Self.establish(sub, in: spool, path: path, atStart: true, logger: logger)
            } catch {
                opened.values.forEach { close($0.fd) }
                close(spool)
                throw error
            }
        }
        held = Locked(Held(folders: opened))
    }

    deinit {
        close(spool)
        held.withLock { held in
            held.folders.values.forEach { close($0.fd) }
            held.retired.forEach { close($0) }
        }
    }

    /// The descriptor of `sub`, after checking that its name still names the held folder; if
    /// not, the folder is made again. If that fails (logged), the held descriptor is returned.
    func current(_ sub: Subfolder) -> Int32 {
        held.withLock { held in
            let open = held.folders[sub]!
            var info = stat()
            if fstatat(spool, sub.rawValue, &info, AT_SYMLINK_NOFOLLOW) == 0,
                UInt64(info.st_dev) == open.device, UInt64(info.st_ino) == open.inode
            {
                return open.fd
            }
            let fresh: OpenFolder
            do {
                fresh = try Self.establish(sub, in: spool, path: path, atStart: false, logger: logger)
            } catch {
                logger.error("\(error); moving into the old \(sub.rawValue)/ for now")
                return open.fd
            }
            held.folders[sub] = fresh
            held.retired.append(open.fd)
            if held.retired.count > Self.retiredKept { close(held.retired.removeFirst()) }
            return fresh.fd
        }
    }

    /// Opens `sub` if it is the daemon's own folder; otherwise removes (or moves aside) what has
    /// its name, makes it anew and opens that. Logs what it replaced.
    private static func establish(
        _ sub: Subfolder, in spool: Int32, path: String, atStart: Bool, logger: Logger
    ) throws(SpoolError) -> OpenFolder {
        let name = sub.rawValue
        let shown = path + "/" + name
        var found: String? = nil
        // A few turns: a member may plant something again between our steps.
        for _ in 0..<5 {
            let fd = openat(spool, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            if fd >= 0 {
                var info = stat()
                fstat(fd, &info)
                if info.st_uid == geteuid() || info.st_uid == 0 {
                    if let found {
                        logger.warning("spool folder \(shown) was replaced (\(found)); made it anew")
                    }
                    return OpenFolder(fd: fd, device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
                }
                close(fd)
                // A folder of a member's: removed if empty, else moved aside, never read.
                if unlinkat(spool, name, AT_REMOVEDIR) == 0 {
                    found = found ?? "a folder of uid \(info.st_uid), removed"
                } else if let aside = SpoolFolders.moveNoReplace(SpoolEntryName(name), from: spool, to: spool, as: "." + name.drop { $0 == "." } + ".replaced") {
                    found = found ?? "a folder of uid \(info.st_uid), moved aside to \(aside)"
                } else {
                    throw .cannotCreate(path: shown, errno: errno)
                }
                continue
            }
            switch errno {
            case ENOENT:
                if !atStart { found = found ?? "it was missing: renamed away or removed" }
            case ELOOP, ENOTDIR:
                // A symlink (O_NOFOLLOW) or a file: removed, never followed.
                var info = stat()
                let kind = fstatat(spool, name, &info, AT_SYMLINK_NOFOLLOW) == 0 && (info.st_mode & S_IFMT) == S_IFLNK
                    ? "a symbolic link" : "not a folder"
                guard unlinkat(spool, name, 0) == 0 || errno == ENOENT else { throw .cannotCreate(path: shown, errno: errno) }
                found = found ?? "\(kind), removed"
            default:
                throw .cannotCreate(path: shown, errno: errno)
            }
            // Members read done/ and failed/ (group); only the daemon writes in them.
            if mkdirat(spool, name, 0o750) != 0, errno != EEXIST { throw .cannotCreate(path: shown, errno: errno) }
        }
        throw .cannotCreate(path: shown, errno: EEXIST)
    }

    /// Moves `name` from folder `from` to folder `to`, under `target` or, if that is taken there,
    /// `stem.N.ext`. Returns the name it got, or nil with errno set.
    func move(_ name: String, from: Int32, to: Int32, as target: String) -> String? {
        Self.moveNoReplace(SpoolEntryName(name), from: from, to: to, as: target)
    }

    /// ``move(_:from:to:as:)`` for an entry named by its bytes (a list dropped in the spool).
    func move(_ name: SpoolEntryName, from: Int32, to: Int32, as target: String) -> String? {
        Self.moveNoReplace(name, from: from, to: to, as: target)
    }

    private static func moveNoReplace(_ name: SpoolEntryName, from: Int32, to: Int32, as target: String) -> String? {
        var candidate = target
        var attempt = 1
        while true {
            if name.withCString({ renameNoReplace(from, $0, to, candidate) }) { return candidate }
            guard errno == EEXIST, attempt < 1000 else { return nil }
            attempt += 1
            candidate = numbered(target, attempt)
        }
    }

    /// The first of `name`, `stem.2.ext`, `stem.3.ext`, … that neither a file nor a report
    /// (`NAME.report.json`) has in `folder`: the name a finishing list will take there, chosen
    /// (and recorded) before its file moves. Only the daemon writes in `done/` and `failed/`, and
    /// only the spool's queue finishes lists, so a name free now is still free at the move.
    func freeName(for name: String, in folder: Int32) -> String {
        var candidate = name
        var attempt = 1
        var info = stat()
        while attempt < 1000,
            fstatat(folder, candidate, &info, AT_SYMLINK_NOFOLLOW) == 0
                || fstatat(folder, candidate + ListReportWriter.suffix, &info, AT_SYMLINK_NOFOLLOW) == 0
        {
            attempt += 1
            candidate = Self.numbered(name, attempt)
        }
        return candidate
    }

    /// True when `old` in `from` and `new` in `to` are one regular file (device and inode).
    static func isSameFile(_ from: Int32, _ old: UnsafePointer<CChar>, _ to: Int32, _ new: String) -> Bool {
        var source = stat(), target = stat()
        guard fstatat(from, old, &source, AT_SYMLINK_NOFOLLOW) == 0, fstatat(to, new, &target, AT_SYMLINK_NOFOLLOW) == 0
        else { return false }
        return (source.st_mode & S_IFMT) == S_IFREG && source.st_dev == target.st_dev && source.st_ino == target.st_ino
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
    private static func renameNoReplace(_ from: Int32, _ old: UnsafePointer<CChar>, _ to: Int32, _ new: String) -> Bool {
        if linkat(from, old, to, new, 0) == 0 {
            unlinkat(from, old, 0)
            return true
        }
        // The target is the file itself: a move that a kill cut between its link and its
        // unlink, tried again after the restart. Finish it rather than make a second name.
        let code = errno
        if code == EEXIST, isSameFile(from, old, to, new) {
            unlinkat(from, old, 0)
            return true
        }
        errno = code
        guard code == EPERM else { return false }
        var info = stat()
        if fstatat(to, new, &info, AT_SYMLINK_NOFOLLOW) == 0 {
            errno = EEXIST
            return false
        }
        return renameat(from, old, to, new) == 0
    }
}
