#if canImport(Glibc)
import Glibc
#endif

/// Connecting to a Unix stream socket by path, for systemd's memory-pressure socket.
enum UnixSocketAddress {
    /// `sun_path`'s size: a path must be shorter, leaving room for its terminating NUL.
    static let maximumPathLength = MemoryLayout.size(ofValue: sockaddr_un().sun_path)

    /// Connects `descriptor` to the socket at `path`; returns 0, or the `errno` of the failure.
    static func connect(_ descriptor: Int32, to path: String) -> Int32 {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < maximumPathLength else { return ENAMETOOLONG }
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
        while true {
            let result = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    Glibc.connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
                }
            }
            if result == 0 { return 0 }
            if errno != EINTR { return errno }
        }
    }
}
