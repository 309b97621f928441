#if canImport(Glibc)
import Glibc
#endif

/// The control socket's file: making room for it at start, setting its mode, and removing it
/// at stop, but only while it is still the file this server created.
struct ControlSocketFile: Sendable {
    /// `sun_path`'s size: a path must be shorter, leaving room for its terminating NUL.
    static let maximumPathLength = MemoryLayout.size(ofValue: sockaddr_un().sun_path)

    /// The mode of the socket file: the owner and the group may connect.
    static let mode: mode_t = 0o660

    let path: String
    private let device: UInt64
    private let inode: UInt64

    /// Makes room for a new socket at `path`: nothing is there, or a stale socket (one that
    /// refuses connections) is there and is removed. A live socket means another server runs;
    /// anything else at the path is left alone.
    static func clearStale(at path: String) throws(ControlServerError) {
        guard path.utf8.count < maximumPathLength else {
            throw .cannotListen(address: path, reason: "the path is longer than \(maximumPathLength - 1) bytes")
        }
        var status = stat()
        guard lstat(path, &status) == 0 else {
            if errno == ENOENT { return }
            throw .cannotListen(address: path, reason: Self.describe(errno))
        }
        guard status.st_mode & S_IFMT == S_IFSOCK else { throw .notASocket(path: path) }
        switch probe(path) {
        case 0, EAGAIN:
            // Connected, or the listener's backlog is full: either way something listens.
            throw .alreadyRunning(path: path)
        case ECONNREFUSED:
            guard unlink(path) == 0 || errno == ENOENT else {
                throw .cannotListen(address: path, reason: "cannot remove the stale socket: \(Self.describe(errno))")
            }
        case ENOENT:
            return
        case let failure:
            throw .cannotListen(address: path, reason: "cannot tell whether the socket there is live: \(Self.describe(failure))")
        }
    }

    /// Sets the mode of the socket just bound at `path` and remembers which file it is.
    static func adopt(_ path: String) throws(ControlServerError) -> ControlSocketFile {
        guard chmod(path, mode) == 0 else {
            throw .cannotListen(address: path, reason: "cannot set the socket's mode: \(Self.describe(errno))")
        }
        var status = stat()
        guard lstat(path, &status) == 0 else {
            throw .cannotListen(address: path, reason: Self.describe(errno))
        }
        return ControlSocketFile(path: path, device: UInt64(status.st_dev), inode: UInt64(status.st_ino))
    }

    /// Removes the socket file, unless another file has taken its place since.
    func remove() {
        var status = stat()
        guard lstat(path, &status) == 0, UInt64(status.st_dev) == device, UInt64(status.st_ino) == inode else { return }
        unlink(path)
    }

    /// Connects to the socket at `path` without blocking; returns 0 or the `errno`.
    private static func probe(_ path: String) -> Int32 {
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard descriptor >= 0 else { return errno }
        defer { close(descriptor) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8)) }
        while true {
            let result = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
                }
            }
            if result == 0 { return 0 }
            if errno != EINTR { return errno }
        }
    }

    static func describe(_ code: Int32) -> String {
        String(cString: strerror(code))
    }
}
