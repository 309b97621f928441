import ImgdCore

/// Counts every eviction the disk tier makes, by reason, and tells one observer of each.
///
/// The disk tier reports here from the one place it removes entries for room, age or a
/// command (``DiskCache/evictLeastRecentlyUsed(toFree:now:passLimit:reason:)``,
/// ``DiskCache/evictExpired(accessedBefore:now:passLimit:)``, ``DiskCache/evict(_:)``), so no
/// caller can evict without it being counted: the maintainer, the room made for a body at
/// admission and the space freed after ENOSPC (both on the cache's housekeeping queue), the
/// `evict` and `purge` commands. Bad
/// entries dropped by a lookup or a check are not evictions and are not counted here.
///
/// Recording is a counter bump under a mutex, then the observer's call outside it; the observer
/// runs on the evicting thread and must only hand the event on (the daemon publishes it).
public final class EvictionLedger: Sendable {
    private struct State {
        var totals: [EvictionReason: Eviction] = [:]
        var observer: (@Sendable (Eviction) -> Void)?
    }

    /// Guards the totals and the observer.
    private let state = Locked(State())

    public init() {}

    /// Calls `observer` with every eviction from now on (one at a time; replaces any earlier
    /// observer). Set it before the cache is used, so nothing is missed.
    public func observe(_ observer: @escaping @Sendable (Eviction) -> Void) {
        state.withLock { $0.observer = observer }
    }

    /// Entries and bytes evicted for `reason` since the cache was opened.
    public func total(_ reason: EvictionReason) -> Eviction {
        state.withLock { $0.totals[reason] } ?? Eviction(reason: reason, files: 0, bytes: 0)
    }

    /// Counts `eviction` and tells the observer; an empty pass is neither.
    func record(_ eviction: Eviction) {
        guard eviction.files > 0 else { return }
        let observer = state.withLock { state in
            var total = state.totals[eviction.reason] ?? Eviction(reason: eviction.reason, files: 0, bytes: 0)
            total.files += eviction.files
            total.bytes += eviction.bytes
            state.totals[eviction.reason] = total
            return state.observer
        }
        observer?(eviction)
    }
}
