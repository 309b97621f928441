import ImgdCore

/// The gauges of `metrics` that cost a query — the disk tier's entry count and pinned bytes
/// (index queries under the reader lock every disk lookup shares) — kept for at most
/// ``maxAge`` (1 s by default), so that scrapes, however frequent, query the index at most
/// once a second and never queue lookups behind them. `status` reads the exact values itself.
///
/// The caller that finds the value stale refreshes it, in its own task; callers meanwhile take
/// the old value rather than query as well. One `Locked` guards the value, its age and whether
/// a refresh is under way (never held while querying).
final class GaugeCache: Sendable {
    /// The cached gauges.
    struct Expensive: Sendable, Equatable {
        var diskEntries = 0
        var pinnedBytes = 0
    }

    private struct State {
        var value: Expensive?
        var readAt: ContinuousClock.Instant
        var refreshing = false
    }

    /// How old a value may be before the next caller reads it again.
    let maxAge: Duration
    private let state = Locked(State(value: nil, readAt: .now))

    init(maxAge: Duration = .seconds(1)) {
        self.maxAge = maxAge
    }

    /// The gauges, from the cache while fresh (or while another caller refreshes them), else
    /// from `read`, which is kept.
    func value(read: () -> Expensive) -> Expensive {
        let now = ContinuousClock.now
        let cached: Expensive? = state.withLock { state in
            if let value = state.value, state.refreshing || now - state.readAt < maxAge { return value }
            state.refreshing = true
            return nil
        }
        if let cached { return cached }
        let fresh = read()
        state.withLock { state in
            state.value = fresh
            state.readAt = .now
            state.refreshing = false
        }
        return fresh
    }
}
