import ImgdCore
import ImgdProtocol

/// Whether the hot set (`ready-lists`) is cached well enough for the machine to take traffic:
/// what `status.ready`, `wait-ready`, `imgctl wait-ready` and the HTTP face's `/readyz` report.
///
/// Readiness is not systemd's `READY=1`, which the daemon sends as soon as its socket answers
/// (socket activation needs that fast). It is reached when every ready list has been read to its
/// end and `cached / total ≥ ready-fraction` over all of them together, where `cached` counts the
/// URLs fetched now or found cached already and `total` every entry read, failed ones and lines
/// that are not URLs included (so failures count against the fraction). With no `ready-lists` it
/// is reached at start. A ready list that is missing, unreadable or refused (see
/// ``ReadyListFile``) has no total: readiness is never reached, and `missing` names it.
///
/// **Latched for the run.** Once reached it stays, whatever happens to the entries later
/// (eviction, `purge`, a reload raising `ready-fraction`): a load balancer that saw a machine
/// ready should not see it flap out because the cache turned over. A restart reads the lists
/// again.
///
/// The counts are fed by ``ReadyListWarmer`` (from the downloader's thread and the warmer's
/// queue) and read by any thread; one `Locked` holds them, and ``reached`` (a ``Promise``) wakes
/// the `wait-ready` requests waiting.
final class ReadinessTracker: Sendable {
    /// One ready list's progress.
    struct ListProgress: Sendable, Equatable {
        enum State: Sendable, Equatable {
            /// Being read (its total is not known yet).
            case reading
            /// Read to its end: its total is known; URLs may still be outstanding.
            case warming
            /// Every entry answered.
            case done
            /// Missing, unreadable or refused: why.
            case missing(String)

            var name: String {
                switch self {
                case .reading: "reading"
                case .warming: "warming"
                case .done: "done"
                case .missing: "missing"
                }
            }
        }

        /// The list's path, as `ready-lists` gives it.
        let name: String
        var state = State.reading
        /// Entries fetched now or found cached already.
        var cached = 0
        /// Entries that failed (download errors, lines that are not URLs, a list cut short).
        var failed = 0
        /// Entries read so far (the total once `state` is past `reading`).
        var read = 0
    }

    /// A copy of the tracker's state, with the verdict.
    struct Snapshot: Sendable {
        let ready: Bool
        let fraction: Double
        let lists: [ListProgress]

        var cached: Int { lists.reduce(0) { $0 + $1.cached } }
        var failed: Int { lists.reduce(0) { $0 + $1.failed } }
        /// Entries read from every list (the total once all are read).
        var total: Int { lists.reduce(0) { $0 + $1.read } }
        /// Cached entries needed: `ceil(fraction × total)`.
        var needed: Int { ReadinessTracker.needed(fraction: fraction, total: total) }

        /// What keeps it from being ready, for a person: the missing lists with their reason,
        /// the lists not read yet, and how many cached entries are still needed.
        var missing: [String] {
            guard !ready else { return [] }
            var reasons: [String] = []
            for list in lists {
                switch list.state {
                case .missing(let reason): reasons.append("\(list.name): \(reason)")
                case .reading: reasons.append("\(list.name): still being read (\(list.read) entries so far)")
                case .warming, .done: break
                }
            }
            if lists.allSatisfy({ $0.state == .warming || $0.state == .done }) {
                reasons.append("\(cached) of \(total) URLs cached (\(failed) failed), \(needed) needed (ready-fraction \(fraction))")
            }
            return reasons
        }

        /// `status.ready`, as Protocol.md describes it.
        var json: JSONValue {
            [
                "ready": .bool(ready), "fraction": JSONValue(fraction), "cached": JSONValue(cached), "failed": JSONValue(failed),
                "total": JSONValue(total), "needed": JSONValue(needed),
                "lists": .array(lists.map { list in
                    [
                        "name": .string(list.name), "state": .string(list.state.name), "cached": JSONValue(list.cached),
                        "failed": JSONValue(list.failed), "total": JSONValue(list.read),
                    ]
                }),
                "missing": .array(missing.map { .string($0) }),
            ]
        }
    }

    private struct State {
        var lists: [ListProgress]
        var fraction: Double
        var ready = false
    }

    /// The counts, the fraction and the latch; written by the warmer and reloads, read by
    /// `status` and `wait-ready` on any thread.
    private let state: Locked<State>
    /// Fulfilled once, when readiness is reached: `wait-ready` awaits it.
    let reached = Promise<Void>()
    /// Fulfilled when the daemon stops: the `wait-ready`s still waiting end with `shutting_down`
    /// at once instead of holding the control socket's drain until its deadline.
    let stopping = Promise<Void>()

    /// A tracker of the lists at `paths` (none: ready at once), ready at `fraction` of their URLs.
    init(lists paths: [String], fraction: Double) {
        state = Locked(State(lists: paths.map { ListProgress(name: $0) }, fraction: fraction))
        evaluate()
    }

    /// Whether readiness has been reached.
    var isReady: Bool { reached.current != nil }

    /// The state now, and the verdict: the one function the HTTP face's `/readyz` and `status`
    /// call (``Snapshot/json`` is `status.ready`).
    func snapshot() -> Snapshot {
        state.withLock { Snapshot(ready: $0.ready, fraction: $0.fraction, lists: $0.lists) }
    }

    /// `count` more entries of list `index` were read.
    func read(_ index: Int, count: Int) {
        state.withLock { $0.lists[index].read += count }
    }

    /// List `index` was read to its end.
    func finishedReading(_ index: Int) {
        changing { state in
            guard state.lists[index].state == .reading else { return }
            let list = state.lists[index]
            state.lists[index].state = list.cached + list.failed == list.read ? .done : .warming
        }
    }

    /// List `index` cannot be read: it stays missing for the run (a list read halfway and then
    /// failing keeps the counts it had, and is missing too).
    func missing(_ index: Int, reason: String) {
        changing { $0.lists[index].state = .missing(reason) }
    }

    /// An entry of list `index` was answered: cached (now or already), or failed.
    func answered(_ index: Int, cached: Bool) {
        changing { state in
            if cached { state.lists[index].cached += 1 } else { state.lists[index].failed += 1 }
            let list = state.lists[index]
            if list.state == .warming, list.cached + list.failed == list.read { state.lists[index].state = .done }
        }
    }

    /// A reload's `ready-fraction`: judged again at once (a lower one may make it ready now; a
    /// higher one does not undo readiness already reached).
    func update(fraction: Double) {
        changing { $0.fraction = fraction }
    }

    /// Applies `change` and latches readiness if it is now reached, waking the waiters (outside the lock).
    private func changing(_ change: (inout State) -> Void) {
        let becameReady = state.withLock { state -> Bool in
            change(&state)
            return Self.latch(&state)
        }
        if becameReady { reached.fulfill(()) }
    }

    private func evaluate() {
        changing { _ in }
    }

    /// Sets `ready` when every list is read and enough of their entries are cached; true if this call set it.
    private static func latch(_ state: inout State) -> Bool {
        guard !state.ready else { return false }
        let read = state.lists.allSatisfy { $0.state == .warming || $0.state == .done }
        guard read else { return false }
        let total = state.lists.reduce(0) { $0 + $1.read }
        let cached = state.lists.reduce(0) { $0 + $1.cached }
        guard cached >= needed(fraction: state.fraction, total: total) else { return false }
        state.ready = true
        return true
    }

    /// Cached entries needed of `total` at `fraction`: `ceil(fraction × total)`, computed so
    /// that 0.9 of 10 is 9 (not 10 from a rounding error).
    static func needed(fraction: Double, total: Int) -> Int {
        let exact = fraction * Double(total)
        let rounded = exact.rounded()
        // Within a rounding error of a whole number: that number.
        if abs(exact - rounded) < 1e-9 * max(1, exact) { return Int(rounded) }
        return Int(exact.rounded(.up))
    }
}
