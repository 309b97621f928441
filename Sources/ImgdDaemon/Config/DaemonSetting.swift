import ImgdCore
import ImgdTOML

#if canImport(Glibc)
import Glibc
#endif

/// One setting: its name (flag and key), whether a reload may change it while running, what
/// `--help` and docs/settings.md say of it, and how it is read, shown and carried over. The only place
/// each of these is written down; its default is the one ``DaemonConfig`` takes from the type
/// that uses the value.
public struct DaemonSetting: Sendable {
    /// The flag (`--disk-limit`) and the configuration file's key (`disk-limit`).
    public let name: String
    /// Whether SIGHUP applies a new value; otherwise the running value stays until a restart.
    public let reloadable: Bool
    /// What it sets, for `--help` and docs/settings.md: one sentence without its default or a final period.
    public let summary: String
    /// What else `--help` says after the default (the units it takes, what happens past it);
    /// nil for nothing.
    public let detail: String?
    /// The placeholder `--help` shows for the value; nil for the flag's own name.
    public let valueName: String?
    /// What having no value means, shown as the default of a setting that has none.
    public let none: String
    /// The value as a flag or key spells it (`1GiB`, `7d`, `true`); nil when there is none.
    let spell: @Sendable (DaemonConfig) -> String?
    /// The value as a reload logs it.
    let show: @Sendable (DaemonConfig) -> String
    /// Sets the value from the file's value (or a flag's text, as a string).
    let apply: @Sendable (inout DaemonConfig, TOMLValue) throws(SettingError) -> Void
    /// Copies the value from one configuration into another (a reload taking it).
    let adopt: @Sendable (inout DaemonConfig, DaemonConfig) -> Void

    init<Value>(
        _ name: String, _ field: WritableKeyPath<DaemonConfig, Value> & Sendable, reloadable: Bool,
        help: SettingHelp,
        show: @escaping @Sendable (Value) -> String,
        spell: @escaping @Sendable (Value) -> String?,
        apply: @escaping @Sendable (TOMLValue) throws(SettingError) -> Value
    ) {
        self.name = name
        self.reloadable = reloadable
        summary = help.summary
        detail = help.detail
        valueName = help.valueName
        none = help.none
        self.spell = { spell($0[keyPath: field]) }
        self.show = { show($0[keyPath: field]) }
        self.apply = { config, value throws(SettingError) in config[keyPath: field] = try apply(value) }
        adopt = { $0[keyPath: field] = $1[keyPath: field] }
    }

    // MARK: - Kinds of setting

    /// A folder or socket path (not empty).
    static func path(
        _ name: String, _ field: WritableKeyPath<DaemonConfig, String> & Sendable, reloadable: Bool, help: SettingHelp
    ) -> Self {
        Self(name, field, reloadable: reloadable, help: help, show: { $0 }, spell: { $0 }) { value throws(SettingError) in
            let text = try value.text()
            guard !text.isEmpty else { throw SettingError(reason: "an empty path") }
            return text
        }
    }

    /// A size: `"512MiB"` or a number of bytes.
    static func bytes(
        _ name: String, _ field: WritableKeyPath<DaemonConfig, Int> & Sendable, minimum: Int, reloadable: Bool,
        help: SettingHelp
    ) -> Self {
        Self(name, field, reloadable: reloadable, help: help, show: { "\(ByteCount($0))" }, spell: spell(bytes:)) {
            value throws(SettingError) in
            let bytes = try byteCount(value)
            guard bytes >= minimum else { throw SettingError(reason: "at least \(ByteCount(minimum))") }
            return bytes
        }
    }

    /// A percentage above 0, at most 100: a number, or its text with or without `%` (`"20%"`).
    static func percentage(_ value: TOMLValue) throws(SettingError) -> Double {
        let number: Double? = switch value {
        case .integer(let value): Double(value)
        case .float(let value): value
        case .string(let text): Double(text.hasSuffix("%") ? String(text.dropLast()) : text)
        default: nil
        }
        guard let number, number > 0, number <= 100 else { throw SettingError(reason: "a percentage above 0, at most 100") }
        return number
    }

    /// A size's value: `"512MiB"` or a number of bytes.
    static func byteCount(_ value: TOMLValue) throws(SettingError) -> Int {
        switch value {
        case .integer(let count): return count
        case .string(let text):
            do {
                return try ByteCount(parsing: text).bytes
            } catch {
                throw SettingError(reason: "\(error)")
            }
        default: throw SettingError(reason: "a size such as \"512MiB\" or a number of bytes, not \(value.typeName)")
        }
    }

    /// A duration: `"12h"` or a number of seconds.
    static func duration(
        _ name: String, _ field: WritableKeyPath<DaemonConfig, Duration> & Sendable, minimum: Duration, reloadable: Bool,
        help: SettingHelp
    ) -> Self {
        Self(name, field, reloadable: reloadable, help: help, show: { "\($0.components.seconds)s" }, spell: spell(duration:)) {
            value throws(SettingError) in
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
        _ name: String, _ field: WritableKeyPath<DaemonConfig, Int> & Sendable, _ range: ClosedRange<Int>, reloadable: Bool,
        help: SettingHelp
    ) -> Self {
        Self(name, field, reloadable: reloadable, help: help, show: { "\($0)" }, spell: { "\($0)" }) { value throws(SettingError) in
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
    static func boolean(
        _ name: String, _ field: WritableKeyPath<DaemonConfig, Bool> & Sendable, reloadable: Bool, help: SettingHelp
    ) -> Self {
        Self(name, field, reloadable: reloadable, help: help, show: { "\($0)" }, spell: { "\($0)" }) { value throws(SettingError) in
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
        _ name: String, _ field: WritableKeyPath<DaemonConfig, String?> & Sendable, reloadable: Bool, help: SettingHelp
    ) -> Self {
        Self(name, field, reloadable: reloadable, help: help, show: { $0 ?? "" }, spell: { $0 }) { value throws(SettingError) in
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

extension DaemonSetting {
    /// A size as a flag would spell it: the largest of GiB, MiB and KiB that divides it
    /// (`1GiB`, `64MiB`), else bytes.
    public static func spell(bytes: Int) -> String {
        for (unit, shift) in [("GiB", 30), ("MiB", 20), ("KiB", 10)] where bytes != 0 && bytes % (1 << shift) == 0 {
            return "\(bytes >> shift)\(unit)"
        }
        return "\(bytes)"
    }

    /// A duration as a flag would spell it: the largest of d, h and m that divides it (`7d`,
    /// `10m`), else seconds.
    public static func spell(duration: Duration) -> String {
        let seconds = duration.components.seconds
        for (unit, length) in [("d", Int64(86_400)), ("h", 3600), ("m", 60)] where seconds != 0 && seconds % length == 0 {
            return "\(seconds / length)\(unit)"
        }
        return "\(seconds)s"
    }

    /// A number as a flag would spell it: `10`, not `10.0`.
    public static func spell(number: Double) -> String {
        number == number.rounded() && abs(number) < 1e15 ? "\(Int(number))" : "\(number)"
    }
}

extension TOMLValue {
    func text() throws(SettingError) -> String {
        guard case .string(let text) = self else { throw SettingError(reason: "a string (in quotes), not \(typeName)") }
        return text
    }
}
