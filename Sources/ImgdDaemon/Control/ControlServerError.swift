/// Why the control server could not start listening.
public enum ControlServerError: Error, Sendable, Hashable, CustomStringConvertible {
    /// A live server answered on the socket path: another imgd is running. The file is left alone.
    case alreadyRunning(path: String)
    /// Something other than a socket is at the path; it is left alone.
    case notASocket(path: String)
    /// The path could not be checked, cleared or bound, or the descriptor not adopted (the path
    /// is too long, a permission is missing, the descriptor is not a listening socket, …).
    case cannotListen(address: String, reason: String)

    public var description: String {
        switch self {
        case .alreadyRunning(let path):
            return "another imgd is listening on \(path)"
        case .notASocket(let path):
            return "\(path) exists and is not a socket; refusing to replace it"
        case .cannotListen(let address, let reason):
            return "cannot listen on \(address): \(reason)"
        }
    }
}
