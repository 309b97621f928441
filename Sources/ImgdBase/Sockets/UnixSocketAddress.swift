#if canImport(Glibc)
import Glibc
#endif

/// The address of a Unix-domain socket: a file's path, or a name in Linux's abstract namespace.
/// Every `sockaddr_un` of imgd, imgctl and their tests is built here, with the length check a
/// path needs.
public struct UnixSocketAddress: Sendable, Hashable, CustomStringConvertible {
    /// The longest path or abstract name, in bytes: 107 on Linux, `sun_path`'s size less the byte
    /// a path needs for its terminating zero (and an abstract name for its leading one).
    public static let maximumLength = MemoryLayout.size(ofValue: sockaddr_un().sun_path) - 1

    /// What goes into `sun_path`: a path's bytes, or a zero and then the abstract name's bytes.
    private let pathBytes: [UInt8]

    /// The socket file at `path` (relative paths are taken from the current folder, as by `bind`).
    public init(path: String) throws(UnixSocketAddressError) {
        let bytes = Array(path.utf8)
        guard bytes.count <= Self.maximumLength else { throw .tooLong(path, limit: Self.maximumLength) }
        pathBytes = bytes
    }

    /// The socket named `name` in the abstract namespace (`@name` in `ss` and systemd's
    /// notation): no file, gone when the last descriptor closes.
    public init(abstractName name: String) throws(UnixSocketAddressError) {
        let bytes = Array(name.utf8)
        guard bytes.count <= Self.maximumLength else { throw .tooLong("@" + name, limit: Self.maximumLength) }
        pathBytes = [0] + bytes
    }

    /// True for a name in the abstract namespace.
    public var isAbstract: Bool { pathBytes.first == 0 }

    /// The path, or `@` and the abstract name.
    public var description: String {
        isAbstract ? "@" + String(decoding: pathBytes.dropFirst(), as: UTF8.self) : String(decoding: pathBytes, as: UTF8.self)
    }

    /// Calls `body` with the address as a `sockaddr` and its length, for `bind`, `connect` and the like.
    public func withSockaddr<Result>(_ body: (UnsafePointer<sockaddr>, socklen_t) -> Result) -> Result {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: pathBytes) }  // the rest stays zero
        // A path's length may cover the whole structure: the zero after it ends it. Every byte
        // of an abstract name counts, zeros included, so its length is exact.
        let length = isAbstract
            ? socklen_t(MemoryLayout<sockaddr_un>.offset(of: \.sun_path)! + pathBytes.count)
            : socklen_t(MemoryLayout<sockaddr_un>.size)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, length) }
        }
    }

    /// Connects `descriptor` to this address, again after a signal (EINTR); returns 0, or the
    /// `errno` of the failure (EINPROGRESS for a non-blocking socket that is not connected yet).
    public func connect(_ descriptor: Int32) -> Int32 {
        retryingOnInterrupt { withSockaddr { Glibc.connect(descriptor, $0, $1) } } == 0 ? 0 : errno
    }

    /// Binds `descriptor` to this address; returns 0, or the `errno` of the failure.
    public func bind(_ descriptor: Int32) -> Int32 {
        withSockaddr { Glibc.bind(descriptor, $0, $1) } == 0 ? 0 : errno
    }
}
