import ImgdNetwork

extension DaemonConfig {
    /// Every setting, in the order `--help` lists them, each with whether a reload may change
    /// it: limits, caps, timeouts, the CA file and the admin group apply at once; folders, the
    /// socket, the connection limits, the pressure threshold, the proxy and the denied ranges need a restart.
    static let settings: [DaemonSetting] = [
        .path("spool", \.spool, reloadable: false),
        .path("cache", \.cache, reloadable: false),
        .path("state", \.state, reloadable: false),
        .path("socket", \.socket, reloadable: false),
        .bytes("disk-limit", \.diskLimit, minimum: 1 << 20, reloadable: true),
        .duration("max-age", \.maxAge, minimum: .seconds(60), reloadable: true),
        .duration("sweep-interval", \.sweepInterval, minimum: .seconds(1), reloadable: true),
        .bytes("memory-limit", \.memoryLimit, minimum: 0, reloadable: true),
        .integer("max-parallel", \.maxParallel, 1...1024, reloadable: true),
        .integer("max-per-host", \.maxPerHost, 1...1024, reloadable: true),
        .integer("attempts", \.attempts, 1...10, reloadable: true),
        .bytes("max-body-bytes", \.maxBodyBytes, minimum: 1024, reloadable: true),
        .duration("timeout", \.timeout, minimum: .seconds(1), reloadable: true),
        DaemonSetting("proxy", \.proxy, reloadable: false, show: { $0 ?? "" }) { value throws(SettingError) in
            let text = try value.text()
            return text.isEmpty ? nil : text
        },
        .readableFile("ca-file", \.caFile, reloadable: true),
        DaemonSetting("deny", \.deny, reloadable: false, show: { $0.joined(separator: ",") }) { value throws(SettingError) in
            let ranges: [String]
            if case .array(let items) = value {
                ranges = try items.map { item throws(SettingError) in try item.text() }
            } else {
                ranges = try value.text().split(separator: ",").map(String.init)
            }
            for range in ranges where IPRange(range) == nil { throw SettingError(reason: "\(range) is not a CIDR range") }
            return ranges
        },
        .boolean("deny-defaults", \.denyDefaults, reloadable: false),
        .integer("max-connections", \.maxConnections, 1...100_000, reloadable: false),
        // The socket's fairness and who may run destructive commands. The group is
        // looked up by name at each load, so a reload also takes a changed gid.
        .integer("max-connections-per-peer", \.maxConnectionsPerPeer, 1...100_000, reloadable: false),
        DaemonSetting("admin-group", \.adminGroup, reloadable: true, show: { $0?.name ?? "" }) { value throws(SettingError) in
            let name = try value.text()
            return name.isEmpty ? nil : try AdminGroup(resolving: name)
        },
        DaemonSetting("pressure-threshold", \.pressureThreshold, reloadable: false, show: { "\($0)" }) { value throws(SettingError) in
            let number: Double? = switch value {
            case .integer(let value): Double(value)
            case .float(let value): value
            case .string(let text): Double(text)
            default: nil
            }
            guard let number, number > 0, number <= 100 else { throw SettingError(reason: "a percentage above 0, at most 100") }
            return number
        },
        // Spool claims:
        .bytes("max-list-bytes", \.maxListBytes, minimum: 1, reloadable: true),
        .integer("max-list-lines", \.maxListLines, 1...1_000_000_000, reloadable: true),
        // Memory bounds on what clients ask for.
        .integer("max-add-urls", \.maxAddURLs, 1...1_000_000, reloadable: true),
        .integer("max-queued", \.maxQueued, 1...100_000_000, reloadable: true),
        .bytes("max-data-bytes", \.maxDataBytes, minimum: 0, reloadable: true),
        // Memory bounds by bytes.
        .bytes("max-queued-bytes", \.maxQueuedBytes, minimum: 8192, reloadable: true),
    ]

    /// Every setting's name, in the order `--help` lists them.
    public static let settingNames = settings.map(\.name)

    private static let settingsByName = Dictionary(uniqueKeysWithValues: settings.map { ($0.name, $0) })

    /// Sets `key` from `value`; `origin` (a file and line, or a flag) goes into the error.
    public mutating func set(_ key: String, to value: TOMLValue, origin: String) throws(ConfigError) {
        guard let setting = Self.settingsByName[key] else {
            let known = Self.settingNames.joined(separator: ", ")
            if case .table = value {
                throw ConfigError(origin: origin, reason: "unknown table [\(key)]: settings are top-level keys (known: \(known))")
            }
            throw ConfigError(origin: origin, reason: "unknown setting \(key) (known: \(known))")
        }
        do {
            try setting.apply(&self, value)
        } catch {
            throw ConfigError(origin: origin, reason: "\(key): \(error.reason)")
        }
    }
}
