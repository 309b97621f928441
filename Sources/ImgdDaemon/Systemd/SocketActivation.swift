import CSystemd

#if canImport(Glibc)
import Glibc
#endif

/// systemd's socket activation: the listening sockets it passes (`LISTEN_FDS`, `LISTEN_PID`,
/// `LISTEN_FDNAMES`), read with libsystemd's `sd_listen_fds_with_names`.
enum SocketActivation {
    /// The sockets passed, by what they are for.
    struct Inherited: Sendable, Equatable {
        /// The control socket: the one named `control` (`imgd.socket`'s
        /// `FileDescriptorName=`), or a single unnamed one (an older unit, `systemd-socket-activate`).
        var control: Int32?
        /// The HTTP face's socket: the one named `http` (`imgd-http.socket`).
        var http: Int32?
        /// Names passed that imgd does not know, to be logged.
        var unknown: [String] = []
    }

    /// The listening stream sockets systemd passed to this process. The variables are removed
    /// so a child process cannot mistake them for its own.
    static func inherited() -> Inherited {
        var names: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?
        let count = sd_listen_fds_with_names(1, &names)
        guard count >= 1 else { return Inherited() }
        defer {
            if let names {
                for index in 0..<Int(count) { free(names[index]) }
                free(names)
            }
        }
        var found = Inherited()
        for index in 0..<Int(count) {
            let fd = SD_LISTEN_FDS_START + Int32(index)
            let name = names?[index].map { String(cString: $0) } ?? "unknown"
            guard sd_is_socket(fd, AF_UNSPEC, Int32(SOCK_STREAM.rawValue), 1) > 0 else {
                found.unknown.append("\(name) (fd \(fd), not a listening stream socket)")
                continue
            }
            switch name {
            case "http":
                found.http = fd
            case "control", "unknown", "stored":
                if found.control == nil, sd_is_socket_unix(fd, Int32(SOCK_STREAM.rawValue), 1, nil, 0) > 0 {
                    found.control = fd
                } else {
                    found.unknown.append("\(name) (fd \(fd))")
                }
            default:
                found.unknown.append("\(name) (fd \(fd))")
            }
        }
        return found
    }
}
