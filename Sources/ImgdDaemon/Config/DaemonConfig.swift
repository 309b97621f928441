import ImgdCore
import ImgdNetwork
import ImgdStore
import ImgdMemoryPressure
import Logging

/// Everything the daemon can be told: folders, cache limits, the downloader's caps, the control
/// socket's limits. Every setting has one name, used both as its flag (`--disk-limit`) and as
/// its key in the configuration file (`disk-limit = "2GiB"`); each is declared once, with
/// whether a reload may change it, its help and how it is read, in ``settings``
/// (`DaemonConfig+Settings.swift`). Each default is the one of the type that uses the value
/// (``DiskCache``, ``MaintenanceSettings``, ``MemoryCache``, ``DownloadPolicy``,
/// ``ControlLimits``, ``MemoryPressureSource``, ``SpoolLimits``, ``WarmingLimits``, ``HeldRequestLimit``, the
/// commands' limits); none is written here.
///
/// Settings come in layers: the embedded default (folders under `./imgd-data`, or systemd's
/// `$STATE_DIRECTORY`, `$CACHE_DIRECTORY`, `$RUNTIME_DIRECTORY`), then the file (TOML 1.0),
/// then the flags; a later layer wins. A reload (SIGHUP) reads the file again and applies the
/// settings declared reloadable; the others keep their running value until a restart
/// (``ConfigReload``).
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
    public var maxAge = MaintenanceSettings().maxAge
    public var sweepInterval = MaintenanceSettings().sweepInterval
    /// When a cached entry that is used is revalidated (``RefreshPolicy``: `off` by default).
    public var refresh = RefreshPolicy().rule
    /// The shortest lifetime `respect-headers` gives a response (``RefreshPolicy/defaultMinFresh``).
    public var minFresh = RefreshPolicy.defaultMinFresh
    /// The two freshness settings, as the downloader takes them.
    public var refreshPolicy: RefreshPolicy { RefreshPolicy(rule: refresh, minFresh: minFresh) }
    public var memoryLimit = MemoryCache.defaultLimitBytes
    public var maxParallel = DownloadPolicy().maxParallel
    public var maxPerHost = DownloadPolicy().maxPerHost
    public var attempts = DownloadPolicy().retry.maxAttempts
    public var maxBodyBytes = DownloadPolicy().maxBodyBytes
    public var timeout = DownloadPolicy().totalTimeout
    /// Bytes a second over the transfers the cap applies to; 0 (the default) is no cap
    /// (``DownloadPolicy/maxRate``).
    public var maxRate = DownloadPolicy().maxRate ?? 0
    /// Which transfers `max-rate` holds back (``DownloadPolicy/maxRateAppliesTo``).
    public var maxRateAppliesTo = DownloadPolicy().maxRateAppliesTo
    public var proxy: String?
    /// The shared tier's URL, as ``TierRoute`` normalises it; nil (the default) fetches from the
    /// origins directly.
    public var tier: String?
    /// Whether a tier failure falls back to the origin (``TierRoute/defaultFallback``).
    public var tierFallback = TierRoute.defaultFallback
    /// A file of PEM certificates trusted for https instead of the system's store; nil (the
    /// default) uses the system's.
    public var caFile: String?
    /// Address ranges (CIDR) refused in addition to the default list (none by default).
    public var deny: [String] = []
    /// Whether ``AddressPolicy/default``'s ranges are refused (default true).
    public var denyDefaults = true
    public var maxConnections = ControlLimits().maxConnections
    // The socket's fairness and who may run destructive commands.
    /// Connections one uid may have open at once (``ControlLimits/maxConnectionsPerPeer``).
    public var maxConnectionsPerPeer = ControlLimits().maxConnectionsPerPeer
    /// The group whose members may run the destructive commands besides root and imgd's own
    /// user (``CommandAuthority``); none by default.
    public var adminGroup: AdminGroup?
    /// `avg10` percentage that counts as pressure when the kernel refuses a PSI trigger.
    public var pressureThreshold = MemoryPressureSource.defaultPollingThreshold
    /// The least severe messages logged (``JournalLogHandler/defaultLevel``: `info`).
    public var logLevel = JournalLogHandler.defaultLevel
    // Spool claims (lists that cannot be abused), see ``SpoolLimits``:
    /// A list file larger than this when claimed is refused unread.
    public var maxListBytes = SpoolLimits().maxListBytes
    /// Entries read from one list, at most.
    public var maxListLines = SpoolLimits().maxListLines
    /// Levels of sitemap indexes followed below a list (``SpoolLimits/sitemapMaxDepth``).
    public var sitemapMaxDepth = SpoolLimits().sitemapMaxDepth
    /// Child sitemaps fetched for one list, at most (``SpoolLimits/sitemapMaxChildren``).
    public var sitemapMaxChildren = SpoolLimits().sitemapMaxChildren
    /// Lists warmed at once; the others wait, claimed, in claim order (``WarmingLimits``).
    public var maxActiveLists = WarmingLimits().maxActiveLists

    // Memory bounds on what clients ask for: reloadable, read per request.
    /// URLs in one `add` (``DaemonCommands/defaultMaxAddURLs``).
    public var maxAddURLs = DaemonCommands.defaultMaxAddURLs
    /// Requests the downloader may hold (queued, running, waiting for a retry; one per URL per
    /// `add`, `get` or spool window) before `add`, `get` with `wait: false` and `retry` are
    /// refused with `queue_full` (``HeldRequestLimit/requests``).
    public var maxQueued = HeldRequestLimit().requests
    // Memory bounds by bytes: the bytes of the held requests' URLs.
    /// Bytes of the URLs of the requests the downloader holds before the same `queue_full`
    /// (``HeldRequestLimit/bytes``).
    public var maxQueuedBytes = HeldRequestLimit().bytes
    /// The percentage of ``maxQueued`` and ``maxQueuedBytes`` one member (a uid that is not
    /// root, imgd's own or in `admin-group`) may hold with `add`, `get` without waiting,
    /// `refresh` and `retry`: 25 by default, so one member's flood refuses that member first and
    /// leaves room for others; 100 gives no share.
    public var maxQueuedShare = 25
    /// The two held-request bounds, as the downloader takes them.
    public var heldRequestLimit: HeldRequestLimit { HeldRequestLimit(requests: maxQueued, bytes: maxQueuedBytes) }
    /// A TOML file of `[host."pattern"]` tables kept apart from the configuration (for secrets:
    /// it must be readable only by the daemon's user); nil (the default) for none.
    public var headersFile: String?
    /// `[host."pattern"]` tables (file only; reloadable).
    public var hosts: [HostSettings] = []
    /// How URLs become cache keys, from the host tables' `key-ignore-query`.
    public var keyPolicy: CacheKeyPolicy {
        CacheKeyPolicy(rules: hosts.map { CacheKeyPolicy.Rule(hosts: $0.pattern, ignoredQuery: $0.keyIgnoreQuery ?? []) })
    }
    /// Quotas per user: the bytes every uid's entries may hold in the disk tier (nil, the
    /// default: no quota), and `[quota."NAME"]` tables over it (file only; reloadable).
    public var quotaPerUser: Int?
    public var quotaTables: [QuotaTable] = []
    /// The quotas the disk tier enforces.
    public var userQuotas: UserQuotas { QuotaTable.quotas(default: quotaPerUser, tables: quotaTables) }
    /// The largest image `get` returns inline with `data: true`
    /// (``DaemonCommands/defaultMaxDataBytes``).
    public var maxDataBytes = DaemonCommands.defaultMaxDataBytes
    /// Where the HTTP face listens; nil (the default) for no HTTP face.
    public var httpListen: HTTPListenAddress?
    /// Whether `http-listen` may be a non-loopback TCP address.
    public var httpAllowRemote = false
    public var httpMaxConnections = HTTPFaceLimits().maxConnections
    public var httpMaxConnectionsPerPeer = HTTPFaceLimits().maxConnectionsPerPeer
    public var httpHeaderBytes = HTTPFaceLimits().maxHeaderBytes
    public var httpHeaderTimeout = HTTPFaceLimits().headerTimeout
    public var httpIdleTimeout = HTTPFaceLimits().idleTimeout
    // Readiness (ReadinessTracker): the hot set warmed at every start, and how much of it must be cached.
    /// Absolute paths of link lists read at every start and kept in place (none by default:
    /// ready at start).
    public var readyLists: [String] = []
    /// The share of the ready lists' entries that must be cached for `status.ready` (1.0 by
    /// default; failed entries count against it).
    public var readyFraction = 1.0

    /// `[window."NAME"]` tables: calendar windows (file only; reloadable).
    public var windows = WindowSchedule.none
    /// Whether prefetching gives way to the host's CPU and I/O pressure (the courtesy loop).
    public var courtesy = true
    /// The stall share, in percent, above which it does.
    public var courtesyThreshold = 20.0
    /// The PSI files it reads; empty: chosen at start (the cgroup's, else the system's).
    public var courtesyPressure: [String] = []

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
        policy.maxRate = maxRate > 0 ? maxRate : nil
        policy.maxRateAppliesTo = maxRateAppliesTo
        policy.proxy = proxy
        // `tier` was checked when set, so it parses.
        policy.tier = tier.flatMap { try? TierRoute($0, fallback: tierFallback) }
        policy.caFile = caFile
        policy.hosts = HostRules(rules: hosts.map(\.rule))
        // `deny` was checked when set, so every range parses.
        policy.addresses = AddressPolicy(
            deniedRanges: (denyDefaults ? AddressPolicy.default.deniedRanges : []) + deny.compactMap(IPRange.init))
        return policy
    }

    /// The control socket's limits these settings describe.
    public var controlLimits: ControlLimits {
        ControlLimits(maxConnections: maxConnections, maxConnectionsPerPeer: maxConnectionsPerPeer)
    }

    /// The HTTP face's limits these settings describe.
    public var httpLimits: HTTPFaceLimits {
        HTTPFaceLimits(
            maxConnections: httpMaxConnections, maxConnectionsPerPeer: httpMaxConnectionsPerPeer, maxHeaderBytes: httpHeaderBytes,
            headerTimeout: httpHeaderTimeout, idleTimeout: httpIdleTimeout)
    }

    /// The spool's caps these settings describe.
    public var spoolLimits: SpoolLimits {
        var limits = SpoolLimits()
        limits.maxListBytes = maxListBytes
        limits.maxListLines = maxListLines
        limits.sitemapMaxDepth = sitemapMaxDepth
        limits.sitemapMaxChildren = sitemapMaxChildren
        return limits
    }

    /// How many lists the spool warms at once, and the bounds their windows share.
    public var warmingLimits: WarmingLimits {
        var limits = WarmingLimits()
        limits.maxActiveLists = maxActiveLists
        limits.maxQueued = maxQueued
        limits.maxQueuedBytes = maxQueuedBytes
        return limits
    }

    /// The cache's upkeep these settings describe.
    public var maintenance: MaintenanceSettings {
        var settings = MaintenanceSettings()
        settings.maxAge = maxAge
        settings.sweepInterval = sweepInterval
        return settings
    }
}
