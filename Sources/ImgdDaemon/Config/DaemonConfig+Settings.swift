import ImgdCore
import ImgdNetwork
import ImgdTOML
import Logging

extension DaemonConfig {
    /// Every setting, in the order `--help` lists them: its name, kind, whether a reload may
    /// change it and what `--help` says of it. Limits, caps, timeouts, the tier, the CA file and
    /// the admin group apply at once; folders, the socket, the connection limits, the pressure threshold,
    /// the proxy and the denied ranges need a restart. The table of settings in docs/settings.md is checked
    /// against this one.
    public static let settings: [DaemonSetting] = [
        .path("spool", \.spool, reloadable: false, help: "Folder watched for link lists"),
        .path("cache", \.cache, reloadable: false, help: "The image cache folder"),
        .path("state", \.state, reloadable: false, help: "Folder of the state database"),
        .path("socket", \.socket, reloadable: false, help: "The control socket's path"),
        .bytes(
            "disk-limit", \.diskLimit, minimum: 1 << 20, reloadable: true,
            help: SettingHelp("The cache's size cap", detail: "KiB, MiB, GiB, KB, MB, GB, or bytes")),
        .duration(
            "max-age", \.maxAge, minimum: .seconds(60), reloadable: true,
            help: SettingHelp("Entries unused this long are removed", detail: "30m, 12h, 7d")),
        .duration("sweep-interval", \.sweepInterval, minimum: .seconds(1), reloadable: true, help: "How often the age sweep runs"),
        // Freshness: when a cached entry that is used is revalidated (RefreshRule).
        DaemonSetting(
            "refresh", \.refresh, reloadable: true,
            help: SettingHelp(
                "When a cached entry that is used is revalidated with its origin",
                detail: "a duration such as 1d: once fetched that long ago; respect-headers: when its Cache-Control or Expires lifetime ends",
                valueName: "off|DURATION|respect-headers"),
            show: { $0.description }, spell: { $0.description }
        ) { value throws(SettingError) in
            do {
                return try RefreshRule(parsing: try value.text())
            } catch {
                throw SettingError(reason: "\(error)")
            }
        },
        .duration(
            "min-fresh", \.minFresh, minimum: .zero, reloadable: true,
            help: "The shortest lifetime refresh = \"respect-headers\" gives a response"),
        .bytes("memory-limit", \.memoryLimit, minimum: 0, reloadable: true, help: "The memory tier's cap"),
        .integer("max-parallel", \.maxParallel, 1...1024, reloadable: true, help: "Transfers at once, in all"),
        .integer("max-per-host", \.maxPerHost, 1...1024, reloadable: true, help: "Transfers at once to one host:port"),
        .integer("attempts", \.attempts, 1...10, reloadable: true, help: "Attempts per URL for transient failures"),
        .bytes(
            "max-body-bytes", \.maxBodyBytes, minimum: 1024, reloadable: true,
            help: SettingHelp("Largest body accepted", detail: "counted as it arrives, not only from its declared length")),
        .duration("timeout", \.timeout, minimum: .seconds(1), reloadable: true, help: "Time allowed for one attempt"),
        DaemonSetting(
            "max-rate", \.maxRate, reloadable: true,
            help: SettingHelp(
                "Bytes a second received over all the transfers it applies to, running ones included",
                detail: "0 is no cap; otherwise at least 1KiB, in the units of disk-limit", valueName: "SIZE"),
            show: { $0 == 0 ? "0 (no cap)" : "\(ByteCount($0))/s" }, spell: { DaemonSetting.spell(bytes: $0) }
        ) { value throws(SettingError) in
            let rate = try DaemonSetting.byteCount(value)
            guard rate == 0 || rate >= DaemonConfig.minimumMaxRate else {
                throw SettingError(reason: "0 (no cap) or at least \(ByteCount(DaemonConfig.minimumMaxRate)) a second")
            }
            return rate
        },
        DaemonSetting(
            "max-rate-applies-to", \.maxRateAppliesTo, reloadable: true,
            help: SettingHelp(
                "Which transfers max-rate holds back: prefetch exempts on-demand gets, all includes them",
                valueName: RateCapScope.allCases.map(\.rawValue).joined(separator: "|")),
            show: { $0.rawValue }, spell: { $0.rawValue }
        ) { value throws(SettingError) in
            guard let scope = RateCapScope(rawValue: try value.text()) else {
                throw SettingError(reason: "one of " + RateCapScope.allCases.map(\.rawValue).joined(separator: ", "))
            }
            return scope
        },
        DaemonSetting(
            "proxy", \.proxy, reloadable: false,
            help: SettingHelp(
                "Proxy URL", detail: "http, https, socks4a or socks5h: the proxy resolves host names; proxy environment variables are ignored"),
            // Shown without its credentials (a reload logs the value); compared as spelled.
            show: { $0.map(ProxyURL.redacted) ?? "" }, spell: { $0 }
        ) { value throws(SettingError) in
            let text = try value.text()
            guard !text.isEmpty else { return nil }
            do throws(ProxyURLError) {
                return try ProxyURL.check(text)
            } catch {
                throw SettingError(reason: error.description)
            }
        },
        // The shared tier (docs/operations.md, "Fleet"): both apply to transfers that start after a reload.
        DaemonSetting(
            "tier", \.tier, reloadable: true,
            help: SettingHelp(
                "A shared cache tier (contrib/fleet/) that every fetch goes through (not those of hosts with headers)",
                detail: "http or https URL; keys and reports keep the origin URL", valueName: "url", none: "none: origins directly"),
            show: { $0 ?? "" }, spell: { $0 }
        ) { value throws(SettingError) in
            let text = try value.text()
            guard !text.isEmpty else { return nil }
            do throws(TierRouteError) {
                return try TierRoute(text).base
            } catch {
                throw SettingError(reason: error.description)
            }
        },
        .boolean(
            "tier-fallback", \.tierFallback, reloadable: true,
            help: SettingHelp(
                "Fetch from the origin directly when the tier fails (no answer, or a 5xx marked X-Tier-Error upstream or internal; never after a refusal)",
                detail: "false: an ordinary failure", valueName: "true|false")),
        .readableFile(
            "ca-file", \.caFile, reloadable: true,
            help: SettingHelp(
                "A file of PEM certificates (a private CA) trusted for https instead of the system's store", valueName: "path")),
        DaemonSetting(
            "headers-file", \.headersFile, reloadable: true,
            help: SettingHelp(
                "A file of [host.\"PATTERN\"] tables (headers with tokens), readable only by imgd's user", valueName: "path"),
            show: { $0 ?? "" }, spell: { $0 }
        ) { value throws(SettingError) in
            let path = try value.text()
            guard !path.isEmpty else { return nil }
            try HostSettings.checkSecretFile(path)
            return DaemonConfig.absolute(path)
        },
        DaemonSetting(
            "deny", \.deny, reloadable: false,
            help: "Also refuse connections to this address range (CIDR); repeatable; added to the default list",
            show: { $0.joined(separator: ",") }, spell: { $0.isEmpty ? nil : $0.joined(separator: ",") }
        ) { value throws(SettingError) in
            let ranges: [String]
            if case .array(let items) = value {
                ranges = try items.map { item throws(SettingError) in try item.text() }
            } else {
                ranges = try value.text().split(separator: ",").map(String.init)
            }
            for range in ranges where IPRange(range) == nil { throw SettingError(reason: "\(range) is not a CIDR range") }
            return ranges
        },
        .boolean(
            "deny-defaults", \.denyDefaults, reloadable: false,
            help: SettingHelp(
                "Refuse the default ranges " + AddressPolicy.default.deniedRanges.map(\.description).joined(separator: ", "),
                detail: "false leaves only --deny", valueName: "true|false")),
        .integer(
            "max-connections", \.maxConnections, 1...100_000, reloadable: false,
            help: SettingHelp("Control socket connections at once", detail: "the last eighth only for users with none open")),
        // The socket's fairness and who may run destructive commands. The group is
        // looked up by name at each load, so a reload also takes a changed gid.
        .integer(
            "max-connections-per-peer", \.maxConnectionsPerPeer, 1...100_000, reloadable: false,
            help: "Control socket connections one user (uid) may have open at once"),
        DaemonSetting(
            "admin-group", \.adminGroup, reloadable: true,
            help: SettingHelp(
                "Group whose members may also run purge of the disk tier, evict, fsck, retry of everything and cancel of others' lists",
                valueName: "name", none: "none: root and imgd's user only"),
            show: { $0?.name ?? "" }, spell: { $0?.name }
        ) { value throws(SettingError) in
            let name = try value.text()
            return name.isEmpty ? nil : try AdminGroup(resolving: name)
        },
        DaemonSetting(
            "pressure-threshold", \.pressureThreshold, reloadable: false,
            help: "avg10 percentage counted as memory pressure when PSI triggers are refused",
            show: { "\($0)" }, spell: DaemonSetting.spell(number:)
        ) { value throws(SettingError) in
            try DaemonSetting.percentage(value)
        },
        DaemonSetting(
            "log-level", \.logLevel, reloadable: true,
            help: SettingHelp(
                "The least severe messages logged",
                valueName: Logger.Level.allCases.map(\.rawValue).joined(separator: "|")),
            show: { $0.rawValue }, spell: { $0.rawValue }
        ) { value throws(SettingError) in
            guard let level = Logger.Level(rawValue: try value.text()) else {
                throw SettingError(reason: "one of " + Logger.Level.allCases.map(\.rawValue).joined(separator: ", "))
            }
            return level
        },
        // Spool claims:
        .bytes(
            "max-list-bytes", \.maxListBytes, minimum: 1, reloadable: true,
            help: "A list file larger than this when claimed is refused unread"),
        .integer(
            "max-list-lines", \.maxListLines, 1...1_000_000_000, reloadable: true,
            help: "Entries read from one list, at most; the rest is a bad_list failure"),
        .integer(
            "sitemap-max-depth", \.sitemapMaxDepth, 0...16, reloadable: true,
            help: SettingHelp(
                "Levels of sitemap indexes followed below an .xml list",
                detail: "its children are level 1; a deeper child is not fetched, and is named in the report")),
        .integer(
            "sitemap-max-children", \.sitemapMaxChildren, 0...1_000_000, reloadable: true,
            help: SettingHelp(
                "Child sitemaps fetched for one .xml list, at most, all levels together",
                detail: "the rest are not fetched, and the report says so")),
        // Spool warming: what bounds the daemon's memory however many lists are dropped.
        .integer(
            "max-active-lists", \.maxActiveLists, 1...100_000, reloadable: true,
            help: SettingHelp(
                "Lists warmed at once; the others wait, claimed, and start in claim order, the owner with the fewest warmed first",
                detail: "their windows together stay within max-queued and max-queued-bytes")),
        // Memory bounds on what clients ask for.
        .integer("max-add-urls", \.maxAddURLs, 1...1_000_000, reloadable: true, help: "URLs in one add request"),
        .integer(
            "max-queued", \.maxQueued, 1...100_000_000, reloadable: true,
            help: """
                Requests held for clients (add, get without waiting, list windows) before add, get without waiting \
                and retry are refused with queue_full
                """),
        .bytes(
            "max-data-bytes", \.maxDataBytes, minimum: 0, reloadable: true,
            help: SettingHelp("Largest image get returns inline with data: true", detail: "counted before base64; larger is too_large")),
        // Memory bounds by bytes.
        .bytes(
            "max-queued-bytes", \.maxQueuedBytes, minimum: 8192, reloadable: true,
            help: "Bytes of the URLs of the held requests before add, get without waiting and retry are refused with queue_full"),
        .integer(
            "max-queued-share", \.maxQueuedShare, 1...100, reloadable: true,
            help: SettingHelp(
                "Percent of max-queued and max-queued-bytes one member's add, get without waiting, refresh and retry may hold",
                detail: "per uid; root, imgd's user and admin-group have no share; 100: none")),
        // The HTTP face (off unless http-listen is set). Its listener and limits need a restart.
        DaemonSetting(
            "http-listen", \.httpListen, reloadable: false,
            help: SettingHelp(
                "Where the HTTP face (read-through origin, /metrics, /readyz) listens",
                detail: "a TCP address must be loopback unless http-allow-remote is true",
                valueName: "unix:PATH|HOST:PORT", none: "none: no HTTP face"),
            show: { $0?.description ?? "" }, spell: { $0?.description }
        ) { value throws(SettingError) in
            let text = try value.text()
            guard !text.isEmpty else { return nil }
            do throws(HTTPListenAddressError) {
                return try HTTPListenAddress(parsing: text)
            } catch {
                throw SettingError(reason: error.reason)
            }
        },
        .boolean(
            "http-allow-remote", \.httpAllowRemote, reloadable: false,
            help: SettingHelp(
                "Let http-listen be a non-loopback address: anyone who reaches it makes imgd fetch URLs",
                valueName: "true|false")),
        .integer(
            "http-max-connections", \.httpMaxConnections, 1...100_000, reloadable: false,
            help: SettingHelp("HTTP face connections at once", detail: "the last eighth only for users with none open")),
        .integer(
            "http-max-connections-per-peer", \.httpMaxConnectionsPerPeer, 1...100_000, reloadable: false,
            help: SettingHelp(
                "HTTP face connections one user (uid) may hold on a Unix socket",
                detail: "a proxy's keepalive pool must fit; TCP peers have no uid")),
        .bytes(
            "http-header-bytes", \.httpHeaderBytes, minimum: 1024, reloadable: false,
            help: SettingHelp("Largest HTTP request head, request line included", detail: "larger gets 431")),
        .duration(
            "http-header-timeout", \.httpHeaderTimeout, minimum: .seconds(1), reloadable: false,
            help: SettingHelp("A request head must arrive whole within this long of its first byte", detail: "else 408")),
        .duration(
            "http-idle-timeout", \.httpIdleTimeout, minimum: .seconds(1), reloadable: false,
            help: "An HTTP connection with no request this long after its last response is closed"),
        // Readiness (docs/operations.md, "Readiness"): status.ready, wait-ready, imgd-ready.service.
        DaemonSetting(
            "ready-lists", \.readyLists, reloadable: false,
            help: SettingHelp(
                "Link lists warmed at every start and kept in place; status.ready and wait-ready report when enough of them is cached",
                detail: "absolute paths; repeatable; owned by root or imgd's user and writable by no one else",
                valueName: "path", none: "none: ready at start"),
            show: { $0.joined(separator: ",") }, spell: { $0.isEmpty ? nil : $0.joined(separator: ",") }
        ) { value throws(SettingError) in
            let paths: [String]
            if case .array(let items) = value {
                paths = try items.map { item throws(SettingError) in try item.text() }
            } else {
                paths = try value.text().split(separator: ",").map(String.init)
            }
            for path in paths where !path.hasPrefix("/") {
                throw SettingError(reason: "\(path) is not an absolute path (a ready list is read from where it is, at every start)")
            }
            return paths
        },
        DaemonSetting(
            "ready-fraction", \.readyFraction, reloadable: true,
            help: SettingHelp(
                "Share of the ready lists' entries that must be cached for imgd to be ready; failed ones count against it",
                detail: "0.0 to 1.0", valueName: "FRACTION"),
            show: { DaemonSetting.spell(number: $0) }, spell: DaemonSetting.spell(number:)
        ) { value throws(SettingError) in
            let number: Double? = switch value {
            case .integer(let value): Double(value)
            case .float(let value): value
            case .string(let text): Double(text)
            default: nil
            }
            guard let number, number >= 0, number <= 1 else { throw SettingError(reason: "a fraction from 0.0 to 1.0") }
            return number
        },
        .boolean(
            "courtesy", \.courtesy, reloadable: true,
            help: SettingHelp(
                "Lower prefetch parallelism while the host's CPU or I/O pressure (PSI some avg10) is over courtesy-threshold",
                detail: "halved while over it, raised by one every 2 s while under it, back to max-parallel; on-demand gets are exempt")),
        DaemonSetting(
            "courtesy-threshold", \.courtesyThreshold, reloadable: true,
            help: SettingHelp(
                "The stall share (PSI some avg10 of cpu and io, the higher) above which prefetching gives way",
                detail: "a percentage above 0, at most 100", valueName: "PERCENT"),
            show: { DaemonSetting.spell(number: $0) + "%" }, spell: { DaemonSetting.spell(number: $0) + "%" }
        ) { value throws(SettingError) in
            try DaemonSetting.percentage(value)
        },
        DaemonSetting(
            "courtesy-pressure", \.courtesyPressure, reloadable: true,
            help: SettingHelp(
                "PSI files the courtesy loop reads (their some avg10, the highest counts)",
                detail: "absolute paths; repeatable", valueName: "path",
                none: "none: the service's cgroup cpu.pressure and io.pressure, else /proc/pressure/cpu and io"),
            show: { $0.isEmpty ? "automatic" : $0.joined(separator: ",") }, spell: { $0.isEmpty ? nil : $0.joined(separator: ",") }
        ) { value throws(SettingError) in
            let paths: [String]
            if case .array(let items) = value {
                paths = try items.map { item throws(SettingError) in try item.text() }
            } else {
                paths = try value.text().split(separator: ",").map(String.init)
            }
            for path in paths where !path.hasPrefix("/") {
                throw SettingError(reason: "\(path) is not an absolute path")
            }
            guard paths.count <= 8 else { throw SettingError(reason: "at most 8 files") }
            return paths
        },
        // Quotas per user (README, "Quotas per user"); [quota."NAME"] tables override it.
        DaemonSetting(
            "quota-per-user", \.quotaPerUser, reloadable: true,
            help: SettingHelp(
                "Bytes of the disk tier the entries charged to one uid may hold; over it, that uid's least recently used entries go",
                detail: "at least 1KiB, in the units of disk-limit; [quota.\"NAME\"] tables override it per user",
                valueName: "SIZE", none: "none: no quota"),
            show: { $0.map { "\(ByteCount($0))" } ?? "none" }, spell: { $0.map(DaemonSetting.spell(bytes:)) }
        ) { value throws(SettingError) in
            if case .string(let text) = value, text.isEmpty { return nil }
            return try QuotaTable.limit(value)
        },
    ]

    /// The lowest `max-rate` other than 0 (no cap): a byte a second would hold a transfer for days.
    static let minimumMaxRate = 1024

    /// Every setting's name, in the order `--help` lists them.
    public static let settingNames = settings.map(\.name)

    private static let settingsByName = Dictionary(uniqueKeysWithValues: settings.map { ($0.name, $0) })

    /// Sets `key` from `value`; `origin` (a file and line, or a flag) goes into the error.
    public mutating func set(_ key: String, to value: TOMLValue, origin: String) throws(ConfigError) {
        guard let setting = Self.settingsByName[key] else {
            let known = Self.settingNames.joined(separator: ", ")
            if case .table = value {
                throw ConfigError(origin: origin, reason: "unknown table [\(key)]: settings are top-level keys, and the only tables are [host.\"PATTERN\"], [window.\"NAME\"] and [quota.\"NAME\"] (known settings: \(known))")
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
