import ImgdCore
import ImgdNetwork
import ImgdTOML

#if canImport(Glibc)
import Glibc
#endif

/// One `[host."pattern"]` table of the configuration file (or of the `headers-file`): settings
/// for the hosts a pattern names (``HostPattern``: an exact host or `*.example.com`, every port
/// or, as in `images.example.com:8443`, one).
///
/// ```toml
/// [host."images.example.com"]
/// max-per-host = 16
/// headers = { Authorization = "Bearer …" }   # over https to port 443 only
/// headers-over-http = false                   # true: also over plain http, to port 80
/// rate = "50/s"
/// key-ignore-query = ["X-Amz-*", "Expires", "Signature", "Key-Pair-Id"]
/// mirrors = ["b.example.com", "c.example.com:8443"]   # the same path and query elsewhere
/// ```
///
/// When several tables match a host, the most specific applies (an exact host, then the
/// longest wildcard); tables do not combine. Host tables come only from the files and reload
/// with them. Header values may be secrets: they are never logged or shown.
public struct HostSettings: Sendable, Equatable {
    /// The hosts the table applies to.
    public let pattern: HostPattern
    /// Query parameters left out of the cache key (``CacheKeyPolicy``).
    public var keyIgnoreQuery: [QueryNamePattern]?
    /// Transfers at once to one `host:port` of these hosts.
    public var maxPerHost: Int?
    /// Headers sent to these hosts only, over https to the pattern's port (443 without one).
    public var headers: [RequestHeader] = []
    /// Whether the headers also go over plain http (to the pattern's port, 80 without one);
    /// nil: not set (false).
    public var headersOverHTTP: Bool?
    /// Requests a second to one `host:port`, as written (`50/s`), and the interval it makes.
    public var rate: (text: String, interval: Duration)?
    /// Hosts that serve the same URLs (same scheme, path and query; the URL's port unless one is
    /// named), tried in order after an item's own mirrors when a URL fails in a way a mirror
    /// can cure; nil: not set (none). At most ``maximumMirrors``.
    public var mirrors: [MirrorHost]?

    /// Mirror hosts a table may name: 8.
    static let maximumMirrors = 8

    public init(pattern: HostPattern) {
        self.pattern = pattern
    }

    public static func == (lhs: HostSettings, rhs: HostSettings) -> Bool {
        lhs.pattern == rhs.pattern && lhs.keyIgnoreQuery == rhs.keyIgnoreQuery && lhs.maxPerHost == rhs.maxPerHost
            && lhs.headers == rhs.headers && lhs.headersOverHTTP == rhs.headersOverHTTP && lhs.rate?.interval == rhs.rate?.interval
            && lhs.mirrors == rhs.mirrors
    }

    /// The downloader's rule these settings make.
    var rule: HostRules.Rule {
        var rule = HostRules.Rule(hosts: pattern)
        rule.maxPerHost = maxPerHost
        rule.headers = headers
        rule.headersOverHTTP = headersOverHTTP ?? false
        rule.requestInterval = rate?.interval
        rule.mirrors = mirrors ?? []
        return rule
    }

    /// `other`'s settings laid over these (a `headers-file` table over the file's table of the
    /// same pattern): what `other` sets wins, and headers are merged by name.
    func merged(with other: HostSettings) -> HostSettings {
        var merged = self
        if let query = other.keyIgnoreQuery { merged.keyIgnoreQuery = query }
        if let cap = other.maxPerHost { merged.maxPerHost = cap }
        if let rate = other.rate { merged.rate = rate }
        if let overHTTP = other.headersOverHTTP { merged.headersOverHTTP = overHTTP }
        if let mirrors = other.mirrors { merged.mirrors = mirrors }
        for header in other.headers {
            merged.headers.removeAll { $0.name.lowercased() == header.name.lowercased() }
            merged.headers.append(header)
        }
        return merged
    }

    /// Lays `overlay`'s tables over `base`'s, pattern by pattern.
    static func merge(_ base: [HostSettings], _ overlay: [HostSettings]) -> [HostSettings] {
        var result = base
        for table in overlay {
            if let index = result.firstIndex(where: { $0.pattern == table.pattern }) {
                result[index] = result[index].merged(with: table)
            } else {
                result.append(table)
            }
        }
        return result
    }

    /// Refuses a `headers-file` anyone but imgd's user could read or change: it holds tokens. It
    /// must be a regular file owned by the daemon's user, without permissions for group or others.
    static func checkSecretFile(_ path: String) throws(SettingError) {
        var info = stat()
        guard stat(path, &info) == 0 else { throw SettingError(reason: "cannot read \(path): \(String(cString: strerror(errno)))") }
        guard info.st_mode & S_IFMT == S_IFREG else { throw SettingError(reason: "\(path) is not a regular file") }
        guard info.st_uid == geteuid() else {
            throw SettingError(reason: "\(path) is owned by uid \(info.st_uid), not by imgd's user (uid \(geteuid())): chown it")
        }
        guard info.st_mode & 0o077 == 0 else {
            let mode = String(info.st_mode & 0o777, radix: 8)
            throw SettingError(reason: "\(path) is open to group or others (mode \(mode)) but may hold secrets: chmod 600 it")
        }
    }

    /// The keys a host table may hold.
    static let keys = ["max-per-host", "headers", "headers-over-http", "rate", "key-ignore-query", "mirrors"]

    /// Reads `50/s`, `3000/m`, `1/h` (a positive number, perhaps with a fraction, per second,
    /// minute or hour) as the interval between requests; at most 10,000 a second.
    static func interval(ofRate text: String) throws(SettingError) -> Duration {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        let per: Double? = parts.count == 2 ? ["s": 1, "m": 60, "min": 60, "h": 3600][String(parts[1])] : nil
        guard let per, let count = Double(parts[0]), count.isFinite, count > 0, count / per <= 10_000 else {
            throw SettingError(reason: "'\(EchoedText.cut(text, limit: 80))' is not a rate such as 50/s, 3000/m or 1/h (at most 10000/s)")
        }
        return .nanoseconds(Int64((per / count * 1e9).rounded()))
    }

    /// Whether `key` (a dotted TOML key, table headers included) lies in a table's `headers`,
    /// whose values may be tokens.
    static func isHeadersKey(_ key: [String]) -> Bool {
        key.count >= 3 && key[0] == "host" && key[2] == "headers"
    }

    /// Reads the `host` table of the file: one subtable per pattern. `line` gives each
    /// entry's `FILE:LINE` for errors. Unless `revealing` (the configuration file, not the
    /// `headers-file`), errors never quote a value: any of that file's may be a secret put in
    /// the wrong place.
    static func tables(from value: TOMLValue, origin: (Int) -> String, line: Int, revealing: Bool) throws(ConfigError) -> [HostSettings] {
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
                case "max-per-host":
                    guard case .integer(let cap) = setting.value, (1...1024).contains(cap) else {
                        let found = revealing ? "\(setting.value)" : setting.value.typeName
                        throw ConfigError(origin: place, reason: "\(name): expected an integer from 1 to 1024, found \(found)")
                    }
                    settings.maxPerHost = cap
                case "rate":
                    guard case .string(let text) = setting.value else {
                        throw ConfigError(origin: place, reason: "\(name): expected a rate such as \"50/s\", found \(setting.value.typeName)")
                    }
                    do {
                        settings.rate = (text, try interval(ofRate: text))
                    } catch {
                        throw ConfigError(
                            origin: place, reason: "\(name): " + (revealing ? error.reason : "not a rate such as 50/s, 3000/m or 1/h (at most 10000/s)"))
                    }
                case "headers":
                    guard case .table(let headers) = setting.value else {
                        throw ConfigError(
                            origin: place, reason: "\(name): expected a table of header names and values, found \(setting.value.typeName)")
                    }
                    settings.headers = []
                    for header in headers.entries {
                        // The value is never echoed: it may be a token.
                        guard case .string(let value) = header.value else {
                            throw ConfigError(
                                origin: origin(header.line), reason: "\(name): the value of \(header.key) must be a string, not \(header.value.typeName)")
                        }
                        do {
                            let made = try RequestHeader(name: header.key, value: value)
                            guard !settings.headers.contains(where: { $0.name.lowercased() == made.name.lowercased() }) else {
                                throw RequestHeaderError(name: header.key, reason: "is given twice")
                            }
                            settings.headers.append(made)
                        } catch {
                            throw ConfigError(origin: origin(header.line), reason: "\(name): \(error)")
                        }
                    }
                case "headers-over-http":
                    guard case .boolean(let allowed) = setting.value else {
                        throw ConfigError(origin: place, reason: "\(name): expected true or false, found \(setting.value.typeName)")
                    }
                    settings.headersOverHTTP = allowed
                case "key-ignore-query":
                    guard case .array(let items) = setting.value else {
                        throw ConfigError(origin: place, reason: "\(name): expected an array of parameter names, found \(setting.value.typeName)")
                    }
                    var patterns: [QueryNamePattern] = []
                    for item in items {
                        guard case .string(let text) = item else {
                            throw ConfigError(origin: place, reason: "\(name): expected parameter names (strings), found \(item.typeName)")
                        }
                        do {
                            patterns.append(try QueryNamePattern(text))
                        } catch {
                            throw ConfigError(origin: place, reason: "\(name): " + (revealing ? "\(error)" : error.reason))
                        }
                    }
                    settings.keyIgnoreQuery = patterns
                case "mirrors":
                    settings.mirrors = try mirrorHosts(setting.value, name: name, place: place, revealing: revealing)
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

    /// A table's `mirrors`: an array of `host` or `host:port` strings, at most
    /// ``maximumMirrors``, none repeated. Unless `revealing`, the error does not quote the entry.
    private static func mirrorHosts(_ value: TOMLValue, name: String, place: String, revealing: Bool) throws(ConfigError) -> [MirrorHost] {
        guard case .array(let items) = value else {
            throw ConfigError(origin: place, reason: "\(name): expected an array of hosts such as [\"b.example\", \"c.example:8443\"], found \(value.typeName)")
        }
        guard items.count <= maximumMirrors else {
            throw ConfigError(origin: place, reason: "\(name): \(items.count) mirrors, more than \(maximumMirrors)")
        }
        var mirrors: [MirrorHost] = []
        for (index, item) in items.enumerated() {
            guard case .string(let text) = item else {
                throw ConfigError(origin: place, reason: "\(name): mirror \(index + 1) is \(item.typeName), not a host string")
            }
            let mirror: MirrorHost
            do {
                mirror = try MirrorHost(text)
            } catch {
                let shown = revealing ? "'\(EchoedText.cut(text, limit: 200))'" : "mirror \(index + 1)"
                throw ConfigError(origin: place, reason: "\(name): \(shown) is not a host or host:port (\(error))")
            }
            guard !mirrors.contains(mirror) else {
                throw ConfigError(origin: place, reason: "\(name): \(mirror) is named twice")
            }
            mirrors.append(mirror)
        }
        return mirrors
    }

    /// How a reload logs the tables: the patterns and what each sets (values that may be
    /// secrets are never shown).
    static func summary(_ tables: [HostSettings]) -> String {
        guard !tables.isEmpty else { return "none" }
        return tables.map { table in
            var parts: [String] = []
            if let cap = table.maxPerHost { parts.append("max-per-host: \(cap)") }
            if let rate = table.rate { parts.append("rate: \(rate.text)") }
            // Names only: a value may be a secret.
            if !table.headers.isEmpty { parts.append("headers: \(table.headers.map(\.name).joined(separator: ","))") }
            if let overHTTP = table.headersOverHTTP { parts.append("headers-over-http: \(overHTTP)") }
            if let query = table.keyIgnoreQuery { parts.append("key-ignore-query: \(query.map(\.text).joined(separator: ","))") }
            if let mirrors = table.mirrors { parts.append("mirrors: \(mirrors.map(\.description).joined(separator: ","))") }
            return "\(table.pattern) (\(parts.joined(separator: "; ")))"
        }.joined(separator: "; ")
    }
}
