import ImgdCore
import ImgdNetwork
import ImgdProtocol

/// The calendar windows at work: which one is in force, the downloader's caps it makes, and who
/// is told when it changes (the spool, to hold or release lists; the event stream).
///
/// ``apply(at:)`` is the one place the position is computed and acted on: the window service
/// calls it at each change it slept until, a reload after replacing the schedule or the
/// top-level caps. The downloader always gets the top-level policy with the window's caps laid
/// over it, so a reload of another setting cannot undo a window.
final class CalendarWindows: Sendable {
    struct State {
        var schedule: WindowSchedule
        /// The policy of the top-level settings, before a window's caps.
        var base: DownloadPolicy
        /// The position last acted on; nil before the first ``apply(at:)``.
        var position: WindowPosition?
        /// The sleep of the window service, cancelled to make it look again now.
        var sleeper: Task<Void, Never>?
        /// A reload came while the service was not asleep: its next sleep ends at once.
        var wakePending = false
    }

    private let state: Locked<State>
    private let zone: any LocalZone
    private let downloader: Downloader
    /// Called after the downloader has new caps: when the window in force changed (`opened`
    /// or closed: the last argument true), and at a reload (false unless the window changed),
    /// with the schedule, the position and the caps in force.
    private let onChange: @Sendable (WindowSchedule, WindowPosition, DownloadPolicy, Bool) -> Void

    init(
        schedule: WindowSchedule, base: DownloadPolicy, downloader: Downloader, zone: any LocalZone = SystemLocalZone(),
        onChange: @escaping @Sendable (WindowSchedule, WindowPosition, DownloadPolicy, Bool) -> Void
    ) {
        state = Locked(State(schedule: schedule, base: base))
        self.zone = zone
        self.downloader = downloader
        self.onChange = onChange
    }

    /// The system clock now, in seconds: windows follow the wall clock, steps included.
    static func now() -> Int64 { Int64(WallClock.systemMilliseconds() / 1000) }

    /// `base` with `window`'s caps laid over it.
    static func policy(_ base: DownloadPolicy, in window: CalendarWindow?) -> DownloadPolicy {
        guard let window else { return base }
        var policy = base
        if let cap = window.maxParallel { policy.maxParallel = cap }
        if let rate = window.maxRate { policy.maxRate = rate == 0 ? nil : rate }
        return policy
    }

    /// The schedule in force and where it stands (`status.window`, the spool's gate).
    var snapshot: (schedule: WindowSchedule, position: WindowPosition?, policy: DownloadPolicy) {
        state.withLock { ($0.schedule, $0.position, Self.policy($0.base, in: $0.position?.current?.window)) }
    }

    /// A reload: the new windows and top-level policy, acted on at once; the service's sleep is
    /// cut short so that it sleeps until the new schedule's next change.
    func update(schedule: WindowSchedule, base: DownloadPolicy) {
        let sleeper = state.withLock { state in
            state.schedule = schedule
            state.base = base
            state.wakePending = true
            return state.sleeper
        }
        // Acted on even if the window is the same: the caps around it may have changed.
        apply(at: Self.now(), force: true)
        sleeper?.cancel()
    }

    /// Computes the position at `instant`; when the window in force changed (or on the first
    /// call), gives the downloader its caps and tells `onChange`. Returns the next instant the
    /// position changes (nil: none within a week).
    @discardableResult
    func apply(at instant: Int64, force: Bool = false) -> Int64? {
        // Acted on under the lock: a reload and the service at a window's edge must not hand
        // the downloader and the spool their results in the other order (the older would stay).
        // What is called only enqueues (the engine's inbox, the spool's queue, the event hub).
        state.withLock { state in
            let position = state.schedule.position(at: instant, in: zone)
            // By window, not by opening: an all-day window open on consecutive days does not
            // change at midnight.
            let changed = state.position == nil || state.position?.current?.window != position.current?.window
            state.position = position
            if changed || force {
                let policy = Self.policy(state.base, in: position.current?.window)
                downloader.update(policy: policy)
                onChange(state.schedule, position, policy, changed)
            }
            return position.changesAt
        }
    }

    /// Sleeps until `instant` (at most `longest`: a clock step is noticed by then), or until a
    /// reload cuts the sleep short.
    func sleep(until instant: Int64?, longest: Duration = .seconds(60)) async {
        let now = WallClock.systemMilliseconds()
        var delay = longest
        if let instant {
            delay = min(longest, .milliseconds(max(0, Int(instant) * 1000 - now)))
        }
        let sleeper = Task { _ = try? await Task.sleep(for: delay) }
        let woken = state.withLock { state in
            defer { state.wakePending = false }
            state.sleeper = sleeper
            return state.wakePending
        }
        if woken { sleeper.cancel() }
        await withTaskCancellationHandler {
            await sleeper.value
        } onCancel: {
            sleeper.cancel()
        }
    }

    /// `status.window` and the `window` event: the window in force (its name, when it opened and
    /// closes, in milliseconds since 1970), the next opening, and the caps in force.
    static func json(_ position: WindowPosition?, policy: DownloadPolicy) -> JSONValue {
        func opening(_ opening: WindowOpening?) -> JSONValue {
            guard let opening else { return .null }
            return .object([
                "name": .string(opening.window.name), "opens_at": JSONValue(Int(opening.opens) * 1000),
                "closes_at": JSONValue(Int(opening.closes) * 1000),
            ])
        }
        return .object([
            "name": position?.current.map { .string($0.window.name) } ?? .null,
            "current": opening(position?.current),
            "next": opening(position?.next),
            "max_parallel": JSONValue(policy.maxParallel),
            "max_rate": policy.maxRate.map { JSONValue($0) } ?? .null,
        ])
    }
}
