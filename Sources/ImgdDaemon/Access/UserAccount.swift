#if canImport(Glibc)
import Glibc
#endif

/// The password database (`getpwnam_r`, `getpwuid_r`: `/etc/passwd`, or whatever NSS is
/// configured with), for quotas per user: a `[quota."alice"]` table names a user that is resolved
/// to a uid when the settings are loaded, and `status.users` shows each uid's name.
enum UserAccount {
    /// The uid of the user `name`; nil when there is no such user. Throws when the database
    /// cannot be read.
    static func uid(named name: String) throws(SettingError) -> UInt32? {
        var entry = passwd()
        var found: UnsafeMutablePointer<passwd>?
        var size = 4096
        while true {
            var buffer = [CChar](repeating: 0, count: size)
            let code = getpwnam_r(name, &entry, &buffer, size, &found)
            if code == ERANGE, size < 1 << 20 {
                size *= 4
                continue
            }
            guard code == 0 else { throw SettingError(reason: "cannot look up user \(name): \(String(cString: strerror(code)))") }
            return found == nil ? nil : entry.pw_uid
        }
    }

    /// The name of `uid`, or nil when it has none (or the database cannot be read).
    static func name(of uid: UInt32) -> String? {
        var entry = passwd()
        var found: UnsafeMutablePointer<passwd>?
        var size = 4096
        while true {
            var buffer = [CChar](repeating: 0, count: size)
            let code = getpwuid_r(uid, &entry, &buffer, size, &found)
            if code == ERANGE, size < 1 << 20 {
                size *= 4
                continue
            }
            guard code == 0, found != nil, let name = entry.pw_name else { return nil }
            return String(cString: name)
        }
    }
}
