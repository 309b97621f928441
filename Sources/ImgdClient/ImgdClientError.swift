#if canImport(Glibc)
import Glibc
#endif

/// What can go wrong talking to imgd, each case with what a caller (or its user) can act on.
public enum ImgdClientError: Error, Equatable, Sendable {
    /// No daemon answers at `socket` (connect failed); `reason` is the system's wording.
    case unreachable(socket: String, reason: String, errno: Int32)
    /// The daemon closed the connection (it stopped, or refused us with `busy`).
    case connectionLost(socket: String)
    /// The daemon answered with an error (Protocol.md's `code` and `message`).
    case daemon(code: String, message: String)
    /// The daemon sent something the protocol does not allow (not JSON, a line over the limit,
    /// a result without a field the call needs, a descriptor it did not announce).
    case badReply(String)
    /// Something on this side failed (a system call, a file).
    case local(String)
    /// The daemon passed a descriptor but this process could not take it (out of descriptors:
    /// the kernel reported the control message truncated). The reply is still good; ask without
    /// `fd` or free some descriptors.
    case descriptorLost(socket: String)
    /// The async client was closed before the call ran.
    case closed
    /// The task awaiting the call was cancelled (``ImgdAsyncClient``).
    case cancelled

    /// The system's wording for an errno: "No such file or directory".
    public static func describe(_ code: Int32) -> String {
        String(cString: strerror(code))
    }
}
