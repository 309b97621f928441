#if canImport(Glibc)
import Glibc
#endif

/// The `admin-group` setting: a group whose members may run the destructive commands
/// (``CommandAuthority``), by name and by the gid the name had when the settings were loaded
/// (at start and at each reload, so a group renumbered in `/etc/group` is taken at the next
/// SIGHUP).
public struct AdminGroup: Sendable, Equatable {
    public let name: String
    public let gid: UInt32

    public init(name: String, gid: UInt32) {
        self.name = name
        self.gid = gid
    }

    /// Looks `name` up in the group database (`getgrnam_r`: `/etc/group`, or whatever NSS is
    /// configured with).
    init(resolving name: String) throws(SettingError) {
        var entry = group()
        var found: UnsafeMutablePointer<group>?
        var size = 4096
        while true {
            var buffer = [CChar](repeating: 0, count: size)
            let code = getgrnam_r(name, &entry, &buffer, size, &found)
            if code == ERANGE, size < 1 << 20 {
                size *= 4
                continue
            }
            guard code == 0 else {
                throw SettingError(reason: "cannot look up group \(name): \(String(cString: strerror(code)))")
            }
            guard found != nil else { throw SettingError(reason: "no group named \(name) (see /etc/group)") }
            self.init(name: name, gid: entry.gr_gid)
            return
        }
    }
}
