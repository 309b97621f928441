/// Why a ``UnixSocketAddress`` cannot be made.
public enum UnixSocketAddressError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The path (or `@` and the abstract name) is longer than a socket address holds: `limit`
    /// bytes, 107 on Linux.
    case tooLong(String, limit: Int)

    public var description: String {
        switch self {
        case .tooLong(let path, let limit): "\(path): longer than a socket address allows (\(limit) bytes)"
        }
    }
}
