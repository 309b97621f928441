import ImgdCore

#if canImport(Glibc)
import Glibc
#endif

/// A ready list opened for reading, after the checks that make a careless configuration fail
/// loudly instead of warming the wrong thing: the file is read where it is (never moved, renamed
/// or written; its bytes and inode are the same after the run), at every start.
///
/// Refused, with the reason `missing` shows (``ReadinessTracker``):
/// - a file that does not exist or cannot be opened (read as imgd's user);
/// - a symbolic link (opened with `O_NOFOLLOW`), a folder, a FIFO, a socket or a device;
/// - a file another user could write: owned by a uid that is neither root nor imgd's, or
///   writable by its group or by others; and likewise a folder on its path (owned by another
///   uid, or group- or other-writable without the sticky bit), whose owner could replace the
///   file. A hot set decides when the machine takes traffic: only whoever configures imgd may
///   say what it holds.
/// - a file larger than `max-list-bytes` (only the bytes it had when opened are read, up to
///   `max-list-lines` entries, as for the spool's lists).
struct ReadyListFile {
    /// The open descriptor; handed to the reader, which closes it.
    let descriptor: Int32
    /// Its size when opened: what is read.
    let size: Int

    /// Why a ready list was refused, for `missing` and the log.
    struct Refusal: Error, CustomStringConvertible {
        let description: String
    }

    /// Opens the ready list at `path` (absolute: the setting checks it) for imgd's user `uid`.
    static func open(_ path: String, maxBytes: Int, uid: UInt32 = geteuid()) throws(Refusal) -> ReadyListFile {
        try checkFolders(of: path, uid: uid)
        let fd = Glibc.open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else {
            let code = errno
            if code == ELOOP { throw Refusal(description: "it is a symbolic link; name the file itself") }
            if code == ENOENT { throw Refusal(description: "no such file") }
            throw Refusal(description: "cannot open it: \(String(cString: strerror(code)))")
        }
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            let code = errno
            close(fd)
            throw Refusal(description: "cannot look at it: \(String(cString: strerror(code)))")
        }
        do throws(Refusal) {
            guard info.st_mode & S_IFMT == S_IFREG else { throw Refusal(description: "it is not a regular file") }
            try checkWriters(info, uid: uid, what: "the file")
            guard Int(info.st_size) <= maxBytes else {
                throw Refusal(description: "it is \(info.st_size) bytes, more than max-list-bytes (\(maxBytes))")
            }
        } catch {
            close(fd)
            throw error
        }
        return ReadyListFile(descriptor: fd, size: Int(info.st_size))
    }

    /// Refuses `info` if a user other than root and `uid` could write it.
    private static func checkWriters(_ info: stat, uid: UInt32, what: String, stickyAllowed: Bool = false) throws(Refusal) {
        guard info.st_uid == 0 || info.st_uid == uid else {
            throw Refusal(description: "\(what) is owned by uid \(info.st_uid), neither root nor imgd's user (uid \(uid)), who could change it")
        }
        let sticky = stickyAllowed && info.st_mode & S_ISVTX != 0
        guard info.st_mode & 0o022 == 0 || sticky else {
            throw Refusal(
                description: "\(what) is writable by its group or by others (mode \(String(info.st_mode & 0o7777, radix: 8))), who could change it")
        }
    }

    /// Refuses a path whose folders another user could write (and so replace the file in).
    private static func checkFolders(of path: String, uid: UInt32) throws(Refusal) {
        var folder = path
        while let slash = folder.lastIndex(of: "/") {
            folder = slash == folder.startIndex ? "/" : String(folder[..<slash])
            var info = stat()
            // A folder that cannot be looked at: the open will say why.
            guard stat(folder, &info) == 0 else { return }
            try checkWriters(info, uid: uid, what: "its folder \(folder)", stickyAllowed: true)
            if folder == "/" { return }
        }
    }
}
