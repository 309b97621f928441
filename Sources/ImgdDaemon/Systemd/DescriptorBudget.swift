import NIOCore

#if canImport(Glibc)
import Glibc
#endif

/// The file descriptors the daemon needs for its settings, checked against `RLIMIT_NOFILE` at
/// start (Protocol.md, *Limits*): the daemon first raises its soft limit to the hard limit, then
/// refuses to start with a `max-connections` it could not serve, rather than failing `accept()`
/// (or a download, or a database write) with EMFILE later.
///
/// What it counts, with the default settings on 2 cores (416 in all):
/// - `max-connections` (256), one descriptor each;
/// - 32 for refused connections, which are open for up to 2 s while their `busy` line is sent;
/// - 64 for the rest of the process: standard streams, the listening socket, sd_notify, the
///   state and cache databases (each with its WAL, shared memory and lock file), the cache and
///   spool folders, inotify, a list being claimed and a report being written;
/// - 3 per event-loop thread of the control server (epoll, eventfd, timerfd), one thread per core;
/// - the downloads: per transfer (`max-parallel`, 8) its socket, its body file and the
///   resolver's socket pair, plus libcurl's cache of idle connections (twice `max-parallel`, at
///   least 32) and its wake-up pair: 58;
/// - with the HTTP face, `http-max-connections` twice (a socket, and the cache file a response
///   sends from), plus 32 for its refused connections and its listening socket.
struct DescriptorBudget: Sendable {
    static let refusalMargin = 32
    static let processMargin = 64

    let connections: Int
    let eventLoops: Int
    let transfers: Int
    /// The HTTP face's share: none without it.
    let http: Int

    init(config: DaemonConfig, cores: Int = System.coreCount) {
        connections = config.maxConnections
        http = config.httpListen == nil ? 0 : 2 * config.httpMaxConnections + Self.refusalMargin
        eventLoops = 3 * cores
        let parallel = config.maxParallel
        transfers = 3 * parallel + max(32, 2 * parallel) + 2
    }

    /// Descriptors needed beside the connections.
    var others: Int { Self.refusalMargin + Self.processMargin + eventLoops + transfers + http }

    var needed: Int { connections + others }

    /// Raises the soft `RLIMIT_NOFILE` to the hard limit (a failure, as under a seccomp filter
    /// that refuses setrlimit, keeps the soft limit) and returns the soft limit now in effect.
    static func raiseLimit() -> Int {
        var limit = rlimit()
        guard getrlimit(Self.resource, &limit) == 0 else { return Int.max }
        if limit.rlim_cur < limit.rlim_max {
            var raised = limit
            raised.rlim_cur = limit.rlim_max
            if setrlimit(Self.resource, &raised) == 0 { limit = raised }
        }
        // RLIM_INFINITY (all bits set) does not import; clamping maps it to Int.max.
        return Int(clamping: limit.rlim_cur)
    }

    private static let resource = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)

    /// Throws when `limit` descriptors cannot serve these settings. The fix it suggests is one
    /// that works: a lower `max-connections` only when at least one connection would then fit
    /// (never "at most 0"), else the limit to raise and to what.
    func check(limit: Int) throws(DaemonStartError) {
        guard needed > limit else { return }
        let fitting = limit - others
        let fix = fitting >= 1
            ? "lower max-connections to at most \(fitting), or raise the limit (LimitNOFILE= in the unit, ulimit -n)"
            : "the rest alone needs \(others), so no max-connections fits: raise the limit to at least \(needed) "
                + "(LimitNOFILE= in the unit, ulimit -n), or lower max-parallel"
        throw DaemonStartError(
            description: "max-connections \(connections) needs \(needed) file descriptors (\(connections) connections, "
                + "\(Self.refusalMargin) for refused ones, \(transfers) for max-parallel downloads, \(eventLoops) for event loops, "
                + "\(Self.processMargin) for databases, folders and the rest"
                + (http > 0 ? ", \(http) for the HTTP face's http-max-connections" : "") + "), but the limit is \(limit) (RLIMIT_NOFILE, "
                + "raised to its hard limit): \(fix)")
    }
}
