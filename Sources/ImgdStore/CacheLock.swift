import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Makes one imgd at a time own a cache folder: an exclusive `flock` on `<cache>/lock`, held
/// until ``release()`` (the kernel drops it when the process dies, however it dies).
/// The holder's pid is written into the file so the refusal can name it.
public final class CacheLock: Sendable {
    /// The lock file.
    public let path: String
    /// The locked file's descriptor; -1 once released.
    private let descriptor: Atomic<Int32>

    /// Takes the lock, or throws ``CacheLockError/held(path:pid:)`` at once if another process has it.
    public init(path: String) throws(CacheLockError) {
        self.path = path
        descriptor = Atomic(try Self.lock(path))
    }

    /// Takes the lock on a new lock file at ``path``: the recovery when the cache folder (and
    /// the file locked) was removed while imgd ran, so a second imgd cannot take the new folder.
    public func reacquire() throws(CacheLockError) {
        let fd = try Self.lock(path)
        let old = descriptor.exchange(fd, ordering: .relaxed)
        if old >= 0 { close(old) }
    }

    private static func lock(_ path: String) throws(CacheLockError) -> Int32 {
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o644)
        guard fd >= 0 else { throw .cannotOpen(path: path, errno: errno) }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            let code = errno
            var text = [UInt8](repeating: 0, count: 32)
            let got = pread(fd, &text, text.count, 0)
            close(fd)
            guard code == EWOULDBLOCK else { throw .cannotOpen(path: path, errno: code) }
            let holder = got > 0 ? Int32(String(decoding: text[0..<got], as: UTF8.self).split(separator: "\n").first ?? "") : nil
            throw .held(path: path, pid: holder)
        }
        let pid = "\(getpid())\n"
        _ = ftruncate(fd, 0)
        _ = pid.withCString { pwrite(fd, $0, strlen($0), 0) }
        return fd
    }

    deinit { release() }

    /// Lets another process take the cache. Safe to call more than once.
    public func release() {
        let fd = descriptor.exchange(-1, ordering: .relaxed)
        guard fd >= 0 else { return }
        // Unlocked before the close: a child forked meanwhile (by any thread, before its exec
        // closes the CLOEXEC copy) shares the open file description, and a close alone would
        // leave the lock held until that exec, refusing the next open of this cache.
        _ = flock(fd, LOCK_UN)
        close(fd)
    }
}

/// Why the cache lock could not be taken.
public enum CacheLockError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Another process holds it.
    case held(path: String, pid: Int32?)
    /// The lock file could not be opened or locked.
    case cannotOpen(path: String, errno: Int32)

    public var description: String {
        switch self {
        case .held(let path, let pid):
            "another imgd\(pid.map { " (pid \($0))" } ?? "") is using this cache (lock \(path) is held); stop it, or give this one another --cache"
        case .cannotOpen(let path, let code):
            "cannot lock \(path): \(String(cString: strerror(code)))"
        }
    }
}
