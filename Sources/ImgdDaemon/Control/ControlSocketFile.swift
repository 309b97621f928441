#if canImport(Glibc)
import Glibc
#endif
import ImgdCore

/// The control socket's file: making room for it at start, setting its mode, and removing it
/// at stop, but only while it is still the file this server created.
struct ControlSocketFile: Sendable {
    /// The mode of the socket file: the owner and the group may connect.
    static let mode: mode_t = 0o660

    let path: String
    private let device: UInt64
    private let inode: UInt64

    /// Makes room for a new socket at `path`: nothing is there, or a stale socket (one that
    /// refuses connections) is there and is removed. A live socket means another server runs;
    /// anything else at the path is left alone.
    static func clearStale(at path: String) throws(ControlServerError) {
        let address: UnixSocketAddress
        do {
            address = try UnixSocketAddress(path: path)
        } catch {
            throw .cannotListen(address: path, reason: "the path is longer than \(UnixSocketAddress.maximumLength) bytes")
        }
        var status = stat()
        guard lstat(path, &status) == 0 else {
            if errno == ENOENT { return }
            throw .cannotListen(address: path, reason: Self.describe(errno))
        }
        guard status.st_mode & S_IFMT == S_IFSOCK else { throw .notASocket(path: path) }
        switch probe(address) {
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

    /// Where to bind the socket before it gets its mode: a private name beside `path`
    /// (`.imgd-<pid>.bind`), so that no client can connect while the file still has the mode
    /// the umask gave it; nil when that name would not fit in a socket address (then the socket
    /// is bound at `path` itself). A leftover of a crashed start is removed.
    static func stagingPath(for path: String) -> String? {
        let slash = path.lastIndex(of: "/")
        let folder = slash.map { String(path[...$0]) } ?? ""
        let staging = folder + ".imgd-\(getpid()).bind"
        guard staging.utf8.count <= UnixSocketAddress.maximumLength else { return nil }
        unlink(staging)
        return staging
    }

    /// Sets the mode of the socket just bound (at `staging`, then moved to `path` with its
    /// mode set; or at `path`) and remembers which file it is.
    static func adopt(_ path: String, boundAt staging: String? = nil) throws(ControlServerError) -> ControlSocketFile {
        guard chmod(staging ?? path, mode) == 0 else {
            let reason = "cannot set the socket's mode: \(Self.describe(errno))"
            if let staging { unlink(staging) }
            throw .cannotListen(address: path, reason: reason)
        }
        if let staging, rename(staging, path) != 0 {
            let reason = "cannot move the socket into place: \(Self.describe(errno))"
            unlink(staging)
            throw .cannotListen(address: path, reason: reason)
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

    /// Connects to the socket at `address` without blocking; returns 0 or the `errno`.
    private static func probe(_ address: UnixSocketAddress) -> Int32 {
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard descriptor >= 0 else { return errno }
        defer { close(descriptor) }
        return address.connect(descriptor)
    }

    static func describe(_ code: Int32) -> String {
        String(cString: strerror(code))
    }
}
