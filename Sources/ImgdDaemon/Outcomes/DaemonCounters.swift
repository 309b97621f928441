import ImgdCore

/// Counters the daemon keeps beyond its services' own, for `stats`.
final class DaemonCounters: Sendable {
    struct Values: Sendable {
        var gets = 0
        var diskHits = 0
        var misses = 0
        /// Failed URLs (of lists, `add` and `get`) by error code.
        var failuresByCode: [String: Int] = [:]
    }

    private let state = Locked(Values())

    var values: Values { state.withLock { $0 } }

    func update(_ change: (inout Values) -> Void) {
        state.withLock { change(&$0) }
    }
}
