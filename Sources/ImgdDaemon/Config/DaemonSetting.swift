import ImgdCore

#if canImport(Glibc)
import Glibc
#endif

/// One setting: its name (flag and key), whether a reload may change it while running, and how
/// it is read, shown and carried over. The only place reloadability is written down.
struct DaemonSetting: Sendable {
    let name: String
    /// Whether SIGHUP applies a new value; otherwise the running value stays until a restart.
    let reloadable: Bool
    /// The value as a reload logs it.
    let show: @Sendable (DaemonConfig) -> String
    /// Sets the value from the file's value (or a flag's text, as a string).
    let apply: @Sendable (inout DaemonConfig, TOMLValue) throws(SettingError) -> Void
    /// Copies the value from one configuration into another (a reload taking it).
    let adopt: @Sendable (inout DaemonConfig, DaemonConfig) -> Void

    init<Value>(
        _ name: String, _ field: WritableKeyPath<DaemonConfig, Value> & Sendable, reloadable: Bool,
        show: @escaping @Sendable (Value) -> String,
        apply: @escaping @Sendable (TOMLValue) throws(SettingError) -> Value
    ) {
        self.name = name
        self.reloadable = reloadable
        self.show = { show($0[keyPath: field]) }
        self.apply = { config, value throws(SettingError) in config[keyPath: field] = try apply(value) }
        adopt = { $0[keyPath: field] = $1[keyPath: field] }
    }

    // MARK: - Kinds of setting

    /// A folder or socket path (not empty).
    static func path(_ name: String, _ field: WritableKeyPath<DaemonConfig, String> & Sendable, reloadable: Bool) -> Self {
        Self(name, field, reloadable: reloadable, show: { $0 }) { value throws(SettingError) in
            let text = try value.text()
            guard !text.isEmpty else { throw SettingError(reason: "an empty path") }
            return text
        }
    }

    /// A size: `"512MiB"` or a number of bytes.
    static func bytes(
        _ name: String, _ field: WritableKeyPath<DaemonConfig, Int> & Sendable, minimum: Int, reloadable: Bool
    ) -> Self {
        Self(name, field, reloadable: reloadable, show: { "\(ByteCount($0))" }) { value throws(SettingError) in
            let bytes: Int
            switch value {
            case .integer(let count): bytes = count
            case .string(let text):
                do {
                    bytes = try ByteCount(parsing: text).bytes
                } catch {
                    throw SettingError(reason: "\(error)")
                }
            default: throw SettingError(reason: "a size such as \"512MiB\" or a number of bytes, not \(value.typeName)")
            }
            guard bytes >= minimum else { throw SettingError(reason: "at least \(ByteCount(minimum))") }
            return bytes
        }
    }

    /// A duration: `"12h"` or a number of seconds.
    static func duration(
        _ name: String, _ field: WritableKeyPath<DaemonConfig, Duration> & Sendable, minimum: Duration, reloadable: Bool
    ) -> Self {
        Self(name, field, reloadable: reloadable, show: { "\($0.components.seconds)s" }) { value throws(SettingError) in
            let duration: Duration
            switch value {
            case .integer(let seconds): duration = .seconds(seconds)
            case .string(let text):
                do {
                    duration = try Duration.parsing(text)
                } catch {
                    throw SettingError(reason: "\(error)")
                }
            default: throw SettingError(reason: "a duration such as \"12h\" or a number of seconds, not \(value.typeName)")
            }
            guard duration >= minimum else { throw SettingError(reason: "at least \(minimum.components.seconds) s") }
            return duration
        }
    }

    /// A whole number in `range` (any TOML integer form, or a flag's decimal text).
    static func integer(
        _ name: String, _ field: WritableKeyPath<DaemonConfig, Int> & Sendable, _ range: ClosedRange<Int>, reloadable: Bool
    ) -> Self {
        Self(name, field, reloadable: reloadable, show: { "\($0)" }) { value throws(SettingError) in
            let number: Int? = switch value {
            case .integer(let number): number
            case .string(let text): Int(text)
            default: nil
            }
            guard let number, range.contains(number) else {
                throw SettingError(reason: "a whole number from \(range.lowerBound) to \(range.upperBound)")
            }
            return number
        }
    }

    /// `true` or `false` (a flag's text, or a TOML boolean).
    static func boolean(_ name: String, _ field: WritableKeyPath<DaemonConfig, Bool> & Sendable, reloadable: Bool) -> Self {
        Self(name, field, reloadable: reloadable, show: { "\($0)" }) { value throws(SettingError) in
            switch value {
            case .boolean(let flag): return flag
            case .string("true"): return true
            case .string("false"): return false
            default: throw SettingError(reason: "true or false")
            }
        }
    }

    /// A file that must exist and be readable when the settings are loaded (at start and at
    /// each reload); an empty string means none.
    static func readableFile(
        _ name: String, _ field: WritableKeyPath<DaemonConfig, String?> & Sendable, reloadable: Bool
    ) -> Self {
        Self(name, field, reloadable: reloadable, show: { $0 ?? "" }) { value throws(SettingError) in
            let path = try value.text()
            guard !path.isEmpty else { return nil }
            let fd = open(path, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { throw SettingError(reason: "cannot read \(path): \(String(cString: strerror(errno)))") }
            defer { close(fd) }
            var info = stat()
            guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG else {
                throw SettingError(reason: "\(path) is not a regular file")
            }
            return DaemonConfig.absolute(path)
        }
    }
}

extension TOMLValue {
    func text() throws(SettingError) -> String {
        guard case .string(let text) = self else { throw SettingError(reason: "a string (in quotes), not \(typeName)") }
        return text
    }
}
