#if canImport(Glibc)
import Glibc
#endif

/// Everything that makes `imgctl` fail after its arguments parsed, each with the exit status it
/// maps to (see ``ImgctlExit``).
public enum ImgctlError: Error, Equatable {
    /// No daemon answers at `socket` (connect failed): exit 3. `reason` is the system's wording.
    case unreachable(socket: String, reason: String, errno: Int32)
    /// The daemon closed the connection (it stopped, or refused us with `busy`): exit 3.
    case connectionLost(socket: String)
    /// The daemon answered a request with an error: exit 1, `imgctl: <code>: <message>`.
    case daemon(code: String, message: String)
    /// The daemon sent something the protocol does not allow (not JSON, a line over the limit,
    /// a result without a field the command needs): exit 1.
    case badReply(String)
    /// Something on this side failed (a file could not be read or written): exit 1.
    case local(String)
    /// The outcome was already reported (for example a link list that ended `failed`): exit
    /// with `status`, print nothing more.
    case reported(status: Int32)

    /// The exit status: 1 the daemon (or this side) failed, 3 the daemon cannot be reached.
    public var exitStatus: Int32 {
        switch self {
        case .unreachable, .connectionLost: return ImgctlExit.unreachable
        case .daemon, .badReply, .local: return ImgctlExit.failure
        case .reported(let status): return status
        }
    }

    /// The line for stderr, `imgctl: …`; nil for ``reported(status:)``. What the daemon sent is
    /// escaped for a terminal (``HumanFormat/text(_:)``).
    public var message: String? {
        switch self {
        case .unreachable(let socket, let reason, let code):
            let hint =
                code == EACCES
                ? "is your user in imgd's group? set --socket or IMGD_SOCKET"
                : "is imgd running? set --socket or IMGD_SOCKET"
            return "imgctl: cannot reach imgd at \(socket): \(reason) (\(hint))"
        case .connectionLost(let socket):
            return "imgctl: imgd closed the connection at \(socket)"
        case .daemon(let code, let message):
            return "imgctl: \(HumanFormat.text(code)): \(HumanFormat.text(message))"
        case .badReply(let what):
            return "imgctl: bad reply from imgd: \(HumanFormat.text(what))"
        case .local(let what):
            return "imgctl: \(what)"
        case .reported:
            return nil
        }
    }
}
