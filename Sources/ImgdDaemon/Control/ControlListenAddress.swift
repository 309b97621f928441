/// Where the control server listens.
public enum ControlListenAddress: Sendable, Hashable, CustomStringConvertible {
    /// A Unix socket file the server creates (mode 0660) and removes when it stops. A stale
    /// socket file is replaced; a live one, or a path that is not a socket, is refused.
    case path(String)
    /// A listening Unix stream socket passed by the service manager (socket activation,
    /// `LISTEN_FDS`, fd 3 and up). The server adopts it and never unlinks its path.
    case inheritedDescriptor(Int32)

    public var description: String {
        switch self {
        case .path(let path): return path
        case .inheritedDescriptor(let descriptor): return "inherited socket (fd \(descriptor))"
        }
    }
}
