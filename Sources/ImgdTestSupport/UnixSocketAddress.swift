#if canImport(Glibc)
import Glibc
#endif

/// The address of a Unix-domain socket, for the tests' own `bind` and `connect` calls: built in
/// one place, with the length check a path needs (at most 107 bytes and a terminating zero).
public enum UnixSocketAddress {
    /// Calls `body` with `path` as a socket address and that address's length; returns nil,
    /// without calling it, when `path` is too long for a socket address.
    public static func with<Result>(
        _ path: String, _ body: (UnsafePointer<sockaddr>, socklen_t) -> Result
    ) -> Result? {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { return nil }
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes + [0]) }
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
    }
}
