#if canImport(Glibc)
import Glibc
#endif
import ImgdBase

/// Drops link lists into the daemon's spool the way Protocol.md asks: each is written in full
/// under a temporary name the daemon ignores (`.NAME.tmp`: a leading dot and a `.tmp` end),
/// flushed to disk, then renamed to `NAME`, so the daemon never sees a partial list.
///
/// A name is never reused: when `NAME` is already in the spool (waiting, being fetched under
/// `.claimed/`, or finished in `done/` or `failed/`, whose reports are named after it) or is
/// one of the daemon's recent lists, the copy gets a numeric suffix before its extension
/// (`links-1.txt`), so its report and its `lists` entry are its own.
struct SpoolWriter {
    /// The spool folder (absolute), from the daemon's `status`.
    let spool: String
    /// Names the daemon already tracks (from `lists`), besides the files in the spool.
    var knownNames: Set<String> = []
    /// Whether a path exists; a seam for tests.
    var exists: (String) -> Bool = ImgctlContext.lstatExists
    /// Called after the list is complete under its temporary name, before the rename.
    var beforeRename: ((_ temporaryPath: String, _ finalPath: String) -> Void)?

    /// The subfolders whose files carry a list's name.
    static let nameHolders = ["", ".claimed/", "done/", "failed/"]

    /// Copies `source` (a path, or `-` for stdin) into the spool; returns the name it got.
    func submit(_ source: String) throws(ImgctlError) -> String {
        let input: Int32
        if source == "-" {
            input = STDIN_FILENO
        } else {
            input = open(source, O_RDONLY | O_CLOEXEC)
            guard input >= 0 else {
                throw .local("cannot read \(source): \(ControlClient.describe(errno))")
            }
        }
        defer { if input != STDIN_FILENO { close(input) } }
        var info = stat()
        if fstat(input, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR {
            throw .local("cannot read \(source): Is a directory")
        }
        let wanted = Self.spoolName(for: source)
        let temporary = try createTemporary(for: wanted)
        do throws(ImgctlError) {
            try copy(from: input, source: source, to: temporary.descriptor, path: temporary.path)
        } catch {
            close(temporary.descriptor)
            unlink(temporary.path)
            throw error
        }
        close(temporary.descriptor)
        var attempt = 0
        while true {
            let (name, number) = uniqueName(wanted, from: attempt)
            let final = spool + "/" + name
            beforeRename?(temporary.path, final)
            switch Self.renameWithoutReplacing(temporary.path, final) {
            case 0:
                return name
            case EEXIST:
                // Another client took the name since we looked: try the next one.
                attempt = number + 1
            case let code:
                unlink(temporary.path)
                throw .local("cannot move \(source) into the spool \(spool): \(ControlClient.describe(code))")
            }
        }
    }

    /// The name a list gets in the spool: the file's own name, made acceptable to the daemon,
    /// which skips names starting with `.` or ending in `.tmp` or `.part`.
    static func spoolName(for source: String) -> String {
        if source == "-" { return "stdin.txt" }
        var name = String(source.split(separator: "/").last ?? "")
        while name.hasPrefix(".") { name.removeFirst() }
        if name.hasSuffix(".tmp") || name.hasSuffix(".part") { name += ".txt" }
        return name.isEmpty ? "list.txt" : name
    }

    /// `name`, or `name` with the smallest suffix from `first` on (`links-1.txt`,
    /// `links-2.txt`, …) that is in no name holder and not a known list.
    func uniqueName(_ name: String, from first: Int = 0) -> (name: String, number: Int) {
        var number = first
        while true {
            let candidate = Self.withSuffix(name, number)
            let taken =
                knownNames.contains(candidate)
                || Self.nameHolders.contains { exists(spool + "/" + $0 + candidate) }
            if !taken { return (candidate, number) }
            number += 1
        }
    }

    /// `links.txt` with 0 → `links.txt`, with 2 → `links-2.txt`; a name without an extension
    /// (or whose only dot leads) gets the suffix at its end.
    static func withSuffix(_ name: String, _ number: Int) -> String {
        guard number > 0 else { return name }
        if let dot = name.lastIndex(of: "."), dot != name.startIndex {
            return "\(name[..<dot])-\(number)\(name[dot...])"
        }
        return "\(name)-\(number)"
    }

    /// Creates `.NAME.tmp` in the spool, exclusively; `.NAME.<pid>.tmp` if a leftover (or a
    /// concurrent imgctl) holds that name.
    private func createTemporary(for name: String) throws(ImgctlError) -> (descriptor: Int32, path: String) {
        for candidate in [".\(name).tmp", ".\(name).\(getpid()).tmp"] {
            let path = spool + "/" + candidate
            let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o640)
            if descriptor >= 0 {
                // Group read whatever the umask: the daemon runs as another user and reads the
                // lists of group imgd's members through the group bits of the setgid spool.
                fchmod(descriptor, 0o640)
                return (descriptor, path)
            }
            if errno != EEXIST {
                throw .local("cannot write into the spool \(spool): \(ControlClient.describe(errno))")
            }
        }
        throw .local("cannot write into the spool \(spool): .\(name).tmp exists (another imgctl?)")
    }

    /// Copies everything from `input` to `output`, then flushes it to disk so the renamed list
    /// is never found empty after a crash.
    private func copy(from input: Int32, source: String, to output: Int32, path: String) throws(ImgctlError) {
        let chunk = 256 * 1024
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: chunk, alignment: 16)
        defer { buffer.deallocate() }
        while true {
            let count = retryingOnInterrupt { read(input, buffer.baseAddress, chunk) }
            if count < 0 {
                throw .local("cannot read \(source): \(ControlClient.describe(errno))")
            }
            if count == 0 { break }
            do throws(WriteError) {
                try writeAll(output, UnsafeRawBufferPointer(rebasing: buffer[..<count]))
            } catch {
                throw .local("cannot write \(path): \(ControlClient.describe(error.errno))")
            }
        }
        guard fsync(output) == 0 else {
            throw .local("cannot write \(path): \(ControlClient.describe(errno))")
        }
    }

    /// `rename(from, to)` that fails with EEXIST instead of replacing `to`: renameat2's
    /// RENAME_NOREPLACE (looked up at run time: Glibc's module map hides it behind
    /// _GNU_SOURCE), or, where the file system or kernel lacks it, a check then a rename.
    /// Returns 0 or the errno.
    static func renameWithoutReplacing(_ from: String, _ to: String) -> Int32 {
        typealias RenameAt2 = @convention(c) (Int32, UnsafePointer<CChar>?, Int32, UnsafePointer<CChar>?, UInt32) -> Int32
        let renameNoReplace: UInt32 = 1  // RENAME_NOREPLACE in <linux/fs.h>
        if let handle = dlopen(nil, RTLD_NOW) {
            defer { dlclose(handle) }
            if let symbol = dlsym(handle, "renameat2") {
                let renameat2 = unsafeBitCast(symbol, to: RenameAt2.self)
                if renameat2(AT_FDCWD, from, AT_FDCWD, to, renameNoReplace) == 0 { return 0 }
                let code = errno
                if code != EINVAL && code != ENOSYS { return code }
            }
        }
        var info = stat()
        if lstat(to, &info) == 0 { return EEXIST }
        return rename(from, to) == 0 ? 0 : errno
    }
}
