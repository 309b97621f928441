import CSystemd

#if canImport(Glibc)
import Glibc
#endif

/// systemd's socket activation: the listening socket it passes (`LISTEN_FDS`, `LISTEN_PID`),
/// read with libsystemd's `sd_listen_fds`.
enum SocketActivation {
    /// The passed descriptor when systemd passed exactly one listening Unix stream socket to this
    /// process; nil otherwise (started by hand: the daemon binds its own socket). The variables
    /// are removed so a child process cannot mistake them for its own.
    static func listeningDescriptor() -> Int32? {
        let count = sd_listen_fds(1)
        guard count >= 1 else { return nil }
        let fd = SD_LISTEN_FDS_START
        guard sd_is_socket_unix(fd, Int32(SOCK_STREAM.rawValue), 1, nil, 0) > 0 else { return nil }
        return fd
    }
}
