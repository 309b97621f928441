/// A read from a file failed; thrown by `FileByteSource`.
///
/// It carries the system's `errno` rather than a message so the caller can tell a vanished
/// file (`EBADF`, `EIO`) from anything else and decide how to log it.
public struct FileReadError: Error, Sendable, Equatable {
    /// The `errno` value `pread` reported.
    public let errno: Int32

    public init(errno: Int32) {
        self.errno = errno
    }
}
