#if canImport(Glibc)
import Glibc
#endif

/// Where the HTTP face listens (`http-listen`): a Unix socket file, a loopback TCP address, or a
/// socket systemd passed (`imgd-http.socket`).
public enum HTTPListenAddress: Sendable, Hashable, CustomStringConvertible {
    /// A Unix socket file the face creates (mode 0660, as the control socket) and removes when it
    /// stops: `unix:/run/imgd/http.sock`.
    case path(String)
    /// A TCP address, literal only (no name is resolved at start): `127.0.0.1:8090`, `[::1]:8090`.
    case tcp(host: String, port: Int)
    /// A listening socket passed by the service manager (its name `http` in `LISTEN_FDNAMES`).
    case inheritedDescriptor(Int32)

    /// Reads `http-listen`'s text: `unix:PATH` (an absolute or relative path) or `HOST:PORT` with
    /// a literal IPv4 host or a bracketed IPv6 one.
    public init(parsing text: String) throws(HTTPListenAddressError) {
        if text.hasPrefix("unix:") {
            let path = String(text.dropFirst(5))
            guard !path.isEmpty else { throw .init(text, reason: "unix: needs a socket path, as in unix:/run/imgd/http.sock") }
            self = .path(path)
            return
        }
        let host: Substring, portText: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") else {
                throw .init(text, reason: "an IPv6 address is written [ADDRESS]:PORT, as in [::1]:8090")
            }
            host = text[text.index(after: text.startIndex)..<close]
            portText = text[text.index(close, offsetBy: 2)...]
        } else {
            guard let colon = text.lastIndex(of: ":") else {
                throw .init(text, reason: "expected unix:PATH or HOST:PORT, as in 127.0.0.1:8090")
            }
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
        }
        guard let port = Int(portText), (1...65_535).contains(port) else {
            throw .init(text, reason: "the port must be a number from 1 to 65535")
        }
        guard Self.isLiteral(String(host)) else {
            throw .init(text, reason: "the host must be a literal IP address (a name is not resolved: write 127.0.0.1 or [::1])")
        }
        self = .tcp(host: String(host), port: port)
    }

    /// Whether a TCP host is a loopback address (127.0.0.0/8, `::1`, `::ffff:127.x.y.z`): the
    /// face fetches whatever URL it is given, so by default it is reachable from this machine only.
    public static func isLoopback(host: String) -> Bool {
        var v4 = in_addr()
        if inet_pton(AF_INET, host, &v4) == 1 { return UInt32(bigEndian: v4.s_addr) >> 24 == 127 }
        var v6 = in6_addr()
        guard inet_pton(AF_INET6, host, &v6) == 1 else { return false }
        let bytes = withUnsafeBytes(of: v6) { Array($0) }
        if bytes[0..<15].allSatisfy({ $0 == 0 }) && bytes[15] == 1 { return true }
        let mapped = bytes[0..<10].allSatisfy({ $0 == 0 }) && bytes[10] == 0xff && bytes[11] == 0xff
        return mapped && bytes[12] == 127
    }

    private static func isLiteral(_ host: String) -> Bool {
        var v4 = in_addr(), v6 = in6_addr()
        return inet_pton(AF_INET, host, &v4) == 1 || inet_pton(AF_INET6, host, &v6) == 1
    }

    public var description: String {
        switch self {
        case .path(let path): return "unix:" + path
        case .tcp(let host, let port): return host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        case .inheritedDescriptor(let descriptor): return "inherited socket (fd \(descriptor))"
        }
    }
}

/// An `http-listen` value that is not an address the face can listen on.
public struct HTTPListenAddressError: Error, Sendable, CustomStringConvertible {
    public let text: String
    public let reason: String

    init(_ text: String, reason: String) {
        self.text = text
        self.reason = reason
    }

    public var description: String { "\(text): \(reason)" }
}
