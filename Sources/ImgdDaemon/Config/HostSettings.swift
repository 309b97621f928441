import ImgdCore

/// One `[host."pattern"]` table of the configuration file: settings for the hosts a pattern
/// names (``HostPattern``: an exact host or `*.example.com`, any port).
///
/// ```toml
/// [host."*.s3.amazonaws.com"]
/// key-ignore-query = ["X-Amz-*", "Expires", "Signature", "Key-Pair-Id"]
/// ```
///
/// When several tables match a host, the most specific applies (an exact host, then the
/// longest wildcard); tables do not combine. Host tables come only from the file and reload
/// with it.
public struct HostSettings: Sendable, Equatable {
    /// The hosts the table applies to.
    public let pattern: HostPattern
    /// Query parameters left out of the cache key (``CacheKeyPolicy``).
    public var keyIgnoreQuery: [QueryNamePattern] = []

    public init(pattern: HostPattern) {
        self.pattern = pattern
    }

    /// The keys a host table may hold.
    static let keys = ["key-ignore-query"]

    /// Reads the `host` table of the file: one subtable per pattern. `line` gives each
    /// entry's `FILE:LINE` for errors.
    static func tables(from value: TOMLValue, origin: (Int) -> String, line: Int) throws(ConfigError) -> [HostSettings] {
        guard case .table(let patterns) = value else {
            throw ConfigError(origin: origin(line), reason: #"host: expected tables such as [host."images.example.com"], found \#(value.typeName)"#)
        }
        var found: [HostSettings] = []
        for entry in patterns.entries {
            let pattern: HostPattern
            do {
                pattern = try HostPattern(entry.key)
            } catch {
                throw ConfigError(origin: origin(entry.line), reason: "[host.\"\(entry.key)\"]: \(error)")
            }
            guard !found.contains(where: { $0.pattern == pattern }) else {
                throw ConfigError(origin: origin(entry.line), reason: "[host.\"\(entry.key)\"]: a second table for \(pattern)")
            }
            guard case .table(let table) = entry.value else {
                throw ConfigError(
                    origin: origin(entry.line), reason: "host.\"\(entry.key)\": expected a table of settings, found \(entry.value.typeName)")
            }
            var settings = HostSettings(pattern: pattern)
            for setting in table.entries {
                let place = origin(setting.line)
                let name = "[host.\"\(entry.key)\"] \(setting.key)"
                switch setting.key {
                case "key-ignore-query":
                    guard case .array(let items) = setting.value else {
                        throw ConfigError(origin: place, reason: "\(name): expected an array of parameter names, found \(setting.value.typeName)")
                    }
                    settings.keyIgnoreQuery = []
                    for item in items {
                        guard case .string(let text) = item else {
                            throw ConfigError(origin: place, reason: "\(name): expected parameter names (strings), found \(item.typeName)")
                        }
                        do {
                            settings.keyIgnoreQuery.append(try QueryNamePattern(text))
                        } catch {
                            throw ConfigError(origin: place, reason: "\(name): \(error)")
                        }
                    }
                default:
                    throw ConfigError(
                        origin: place,
                        reason: "unknown setting \(setting.key) in [host.\"\(entry.key)\"] (known: \(keys.joined(separator: ", ")))")
                }
            }
            found.append(settings)
        }
        return found
    }

    /// How a reload logs the tables: the patterns and what each sets (values that may be
    /// secrets are never shown).
    static func summary(_ tables: [HostSettings]) -> String {
        guard !tables.isEmpty else { return "none" }
        return tables.map { table in
            "\(table.pattern) (key-ignore-query: \(table.keyIgnoreQuery.map(\.text).joined(separator: ",")))"
        }.joined(separator: "; ")
    }
}
