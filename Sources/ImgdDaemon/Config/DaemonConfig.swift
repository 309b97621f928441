import ImgdCore
import ImgdNetwork
import ImgdStore

/// Everything the daemon can be told: folders, cache limits, the downloader's caps, the control
/// socket's limits. Every setting has one name, used both as its flag (`--disk-limit`) and as
/// its key in the configuration file (`disk-limit = "2GiB"`).
///
/// Settings come in layers: the embedded default (folders under `./imgd-data`, or systemd's
/// `$STATE_DIRECTORY`, `$CACHE_DIRECTORY`, `$RUNTIME_DIRECTORY`), then the file, then the flags;
/// a later layer wins. A reload (SIGHUP) reads the file again and applies what can change while
/// running (limits and caps); a changed folder needs a restart and is reported as such.
public struct DaemonConfig: Sendable, Equatable {
    /// Where link lists are dropped.
    public var spool: String
    /// The image cache.
    public var cache: String
    /// The state database (lists and their URLs).
    public var state: String
    /// The control socket.
    public var socket: String
    public var diskLimit = DiskCache.defaultLimit
    public var maxAge: Duration = .seconds(7 * 86_400)
    public var sweepInterval: Duration = .seconds(600)
    public var memoryLimit = 64 << 20
    public var maxParallel = DownloadPolicy().maxParallel
    public var maxPerHost = DownloadPolicy().maxPerHost
    public var attempts = DownloadPolicy().retry.maxAttempts
    public var maxBodyBytes = DownloadPolicy().maxBodyBytes
    public var timeout = DownloadPolicy().totalTimeout
    public var proxy: String?
    /// Address ranges (CIDR) refused; empty keeps the default list.
    public var deny: [String] = []
    public var maxConnections = 256
    /// `avg10` percentage that counts as pressure when the kernel refuses a PSI trigger.
    public var pressureThreshold = 10.0

    /// The embedded default: under systemd (its directory variables set) the folders it made
    /// for the service; otherwise `./imgd-data/{spool,cache,state}` and `./imgd-data/imgd.sock`.
    public static func embedded(environment: [String: String]) -> DaemonConfig {
        func first(_ name: String) -> String? {
            // systemd passes several folders colon-separated when a unit names several.
            environment[name].flatMap { $0.split(separator: ":").first.map(String.init) }
        }
        let state = first("STATE_DIRECTORY") ?? "./imgd-data/state"
        return DaemonConfig(
            spool: first("STATE_DIRECTORY").map { $0 + "/spool" } ?? "./imgd-data/spool",
            cache: first("CACHE_DIRECTORY") ?? "./imgd-data/cache",
            state: state,
            socket: first("RUNTIME_DIRECTORY").map { $0 + "/imgd.sock" } ?? "./imgd-data/imgd.sock")
    }

    public init(spool: String, cache: String, state: String, socket: String) {
        self.spool = spool
        self.cache = cache
        self.state = state
        self.socket = socket
    }

    /// The downloader's policy these settings describe.
    public var downloadPolicy: DownloadPolicy {
        var policy = DownloadPolicy()
        policy.maxParallel = maxParallel
        policy.maxPerHost = maxPerHost
        policy.retry.maxAttempts = attempts
        policy.maxBodyBytes = maxBodyBytes
        policy.totalTimeout = timeout
        policy.proxy = proxy
        if !deny.isEmpty { policy.addresses = AddressPolicy(deniedRanges: deny.compactMap(IPRange.init)) }
        return policy
    }

    /// The cache's upkeep these settings describe.
    public var maintenance: MaintenanceSettings {
        var settings = MaintenanceSettings()
        settings.maxAge = maxAge
        settings.sweepInterval = sweepInterval
        return settings
    }

    // MARK: - Settings by name

    /// Sets `key` from `value`; `origin` (a file and line, or a flag) goes into the error.
    public mutating func set(_ key: String, to value: TOMLValue, origin: String) throws(ConfigError) {
        guard let setting = Self.settings[key] else {
            throw ConfigError(origin: origin, reason: "unknown setting \(key) (known: \(Self.settingNames.joined(separator: ", ")))")
        }
        do {
            try setting.apply(&self, value)
        } catch {
            throw ConfigError(origin: origin, reason: "\(key): \(error.reason)")
        }
    }

    /// What differs from `other`, by setting name, each with its new value, and whether it can
    /// change while running.
    public func changes(from other: DaemonConfig) -> [(key: String, value: String, reloadable: Bool)] {
        Self.settingNames.compactMap { name in
            let setting = Self.settings[name]!
            let (old, new) = (setting.show(other), setting.show(self))
            return old == new ? nil : (name, new, setting.reloadable)
        }
    }

    /// Every setting's name, in the order `--help` lists them.
    public static let settingNames = [
        "spool", "cache", "state", "socket", "disk-limit", "max-age", "sweep-interval", "memory-limit",
        "max-parallel", "max-per-host", "attempts", "max-body-bytes", "timeout", "proxy", "deny",
        "max-connections", "pressure-threshold",
    ]

    private static let settings: [String: Setting] = [
        "spool": .path(\.spool),
        "cache": .path(\.cache),
        "state": .path(\.state),
        "socket": .path(\.socket),
        "disk-limit": .bytes(\.diskLimit, minimum: 1 << 20),
        "max-age": .duration(\.maxAge, minimum: .seconds(60)),
        "sweep-interval": .duration(\.sweepInterval, minimum: .seconds(1)),
        "memory-limit": .bytes(\.memoryLimit, minimum: 0),
        "max-parallel": .integer(\.maxParallel, 1...1024),
        "max-per-host": .integer(\.maxPerHost, 1...1024),
        "attempts": .integer(\.attempts, 1...10),
        "max-body-bytes": .bytes(\.maxBodyBytes, minimum: 1024),
        "timeout": .duration(\.timeout, minimum: .seconds(1)),
        "proxy": Setting(reloadable: false, show: { $0.proxy ?? "" }) { config, value throws(SettingError) in
            let text = try value.text()
            config.proxy = text.isEmpty ? nil : text
        },
        "deny": Setting(reloadable: false, show: { $0.deny.joined(separator: ",") }) { config, value throws(SettingError) in
            let ranges: [String]
            if case .array(let items) = value {
                ranges = try items.map { item throws(SettingError) in try item.text() }
            } else {
                ranges = try value.text().split(separator: ",").map(String.init)
            }
            for range in ranges where IPRange(range) == nil { throw SettingError(reason: "\(range) is not a CIDR range") }
            config.deny = ranges
        },
        "max-connections": .integer(\.maxConnections, 1...100_000, reloadable: false),
        "pressure-threshold": Setting(reloadable: false, show: { "\($0.pressureThreshold)" }) { config, value throws(SettingError) in
            let number: Double? = switch value {
            case .integer(let value): Double(value)
            case .float(let value): value
            case .string(let text): Double(text)
            default: nil
            }
            guard let number, number > 0, number <= 100 else { throw SettingError(reason: "a percentage above 0, at most 100") }
            config.pressureThreshold = number
        },
    ]
}

/// A setting that cannot be used, with where it came from.
public struct ConfigError: Error, Sendable, Equatable, CustomStringConvertible {
    /// `--flag`, or `FILE:LINE`.
    public let origin: String
    public let reason: String

    public var description: String { "\(origin): \(reason)" }
}

/// Why one value does not fit its setting.
struct SettingError: Error {
    let reason: String
}

/// How one setting is read, shown and changed.
private struct Setting: Sendable {
    let reloadable: Bool
    let show: @Sendable (DaemonConfig) -> String
    let apply: @Sendable (inout DaemonConfig, TOMLValue) throws(SettingError) -> Void

    init(
        reloadable: Bool, show: @escaping @Sendable (DaemonConfig) -> String,
        apply: @escaping @Sendable (inout DaemonConfig, TOMLValue) throws(SettingError) -> Void
    ) {
        self.reloadable = reloadable
        self.show = show
        self.apply = apply
    }

    static func path(_ field: WritableKeyPath<DaemonConfig, String> & Sendable) -> Setting {
        Setting(reloadable: false, show: { $0[keyPath: field] }) { config, value throws(SettingError) in
            let text = try value.text()
            guard !text.isEmpty else { throw SettingError(reason: "an empty path") }
            config[keyPath: field] = text
        }
    }

    static func bytes(_ field: WritableKeyPath<DaemonConfig, Int> & Sendable, minimum: Int) -> Setting {
        Setting(reloadable: true, show: { "\(ByteCount($0[keyPath: field]))" }) { config, value throws(SettingError) in
            let bytes: Int
            switch value {
            case .integer(let count): bytes = count
            case .string(let text):
                do {
                    bytes = try ByteCount(parsing: text).bytes
                } catch {
                    throw SettingError(reason: "\(error)")
                }
            default: throw SettingError(reason: "a size such as \"512MiB\" or a number of bytes")
            }
            guard bytes >= minimum else { throw SettingError(reason: "at least \(ByteCount(minimum))") }
            config[keyPath: field] = bytes
        }
    }

    static func duration(_ field: WritableKeyPath<DaemonConfig, Duration> & Sendable, minimum: Duration) -> Setting {
        Setting(reloadable: true, show: { "\($0[keyPath: field].components.seconds)s" }) { config, value throws(SettingError) in
            let duration: Duration
            switch value {
            case .integer(let seconds): duration = .seconds(seconds)
            case .string(let text):
                do {
                    duration = try Duration.parsing(text)
                } catch {
                    throw SettingError(reason: "\(error)")
                }
            default: throw SettingError(reason: "a duration such as \"12h\" or a number of seconds")
            }
            guard duration >= minimum else { throw SettingError(reason: "at least \(minimum.components.seconds) s") }
            config[keyPath: field] = duration
        }
    }

    static func integer(
        _ field: WritableKeyPath<DaemonConfig, Int> & Sendable, _ range: ClosedRange<Int>, reloadable: Bool = true
    ) -> Setting {
        Setting(reloadable: reloadable, show: { "\($0[keyPath: field])" }) { config, value throws(SettingError) in
            let number: Int? = switch value {
            case .integer(let number): number
            case .string(let text): Int(text)
            default: nil
            }
            guard let number, range.contains(number) else {
                throw SettingError(reason: "a whole number from \(range.lowerBound) to \(range.upperBound)")
            }
            config[keyPath: field] = number
        }
    }
}

extension TOMLValue {
    fileprivate func text() throws(SettingError) -> String {
        guard case .string(let text) = self else { throw SettingError(reason: "a string (in quotes)") }
        return text
    }
}
