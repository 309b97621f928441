import ImgdCore
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// The opens and closes of one file, as inotify reports them: how a test learns that another
/// process has read a file since the test last wrote it, where no timestamp would tell (a
/// read-only bind mount of the file updates no access time).
///
/// Events are taken from the kernel's queue when asked for (the descriptor is non-blocking), so
/// no thread waits on it.
final class FileAccessWatch: Sendable {
    /// One event on the file, in the order they happened.
    enum Access: Sendable, Equatable {
        case opened
        case closedAfterReading
        case closedAfterWriting
    }

    private let descriptor: Int32
    /// Every event taken from the queue so far.
    private let seen = Locked<[Access]>([])

    /// Starts watching `path` (which must exist).
    init(_ path: String) throws {
        let descriptor = inotify_init1(Int32(IN_CLOEXEC | IN_NONBLOCK))
        guard descriptor >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        guard inotify_add_watch(descriptor, path, UInt32(IN_OPEN | IN_CLOSE_WRITE | IN_CLOSE_NOWRITE)) >= 0 else {
            let code = errno
            close(descriptor)
            throw POSIXError(POSIXErrorCode(rawValue: code) ?? .EIO)
        }
        self.descriptor = descriptor
    }

    deinit { close(descriptor) }

    /// Every event so far, oldest first.
    var accesses: [Access] {
        seen.withLock { seen in
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
                if count < 0, errno == EINTR { continue }
                guard count > 0 else { break }  // EAGAIN: nothing more queued
                var offset = 0
                // struct inotify_event: wd, mask, cookie, len (4 bytes each), then `len` bytes of name.
                while offset + 16 <= count {
                    let (mask, length) = buffer.withUnsafeBytes {
                        ($0.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self),
                         Int($0.loadUnaligned(fromByteOffset: offset + 12, as: UInt32.self)))
                    }
                    if mask & UInt32(IN_OPEN) != 0 { seen.append(.opened) }
                    if mask & UInt32(IN_CLOSE_NOWRITE) != 0 { seen.append(.closedAfterReading) }
                    if mask & UInt32(IN_CLOSE_WRITE) != 0 { seen.append(.closedAfterWriting) }
                    offset += 16 + length
                }
            }
            return seen
        }
    }

    /// True once another open of the file began after the last write to it was closed, and was
    /// closed again: whoever opened it read what was written.
    var wasReadSinceLastWrite: Bool {
        let all = accesses
        let start = (all.lastIndex(of: .closedAfterWriting) ?? -1) + 1
        guard let opened = all[start...].firstIndex(of: .opened) else { return false }
        return all[(opened + 1)...].contains(.closedAfterReading)
    }
}
