/// The deadline of one poll (``eventually(timeout:interval:_:)``), which counts only the time
/// the poller was able to run.
///
/// The whole suite runs ~16 tests at once on 2 cores, where a task may wait seconds for a
/// thread. When a pause comes back late by more than ``starvation`` (a quarter of a second), the
/// process (or its cooperative pool) was starved, and whatever the test waits for was most
/// likely starved with it: that lateness is added to the deadline, up to `timeout` again in all,
/// so that a machine frozen for half a minute by the rest of the suite does not fail a test
/// whose subject never got a thread, while a real hang still ends within twice the `timeout`.
/// Whoever polls asks once more after the deadline before giving up.
public struct PollDeadline: Sendable {
    /// How late a pause must come back to count as starvation rather than ordinary scheduling.
    public static let starvation = Duration.milliseconds(250)

    /// The time given; the deadline moves by at most as much again.
    public let timeout: Duration
    /// The pause between two checks.
    public let interval: Duration
    /// When the poll gives up, as moved by the starvation seen so far.
    public private(set) var deadline: ContinuousClock.Instant
    /// How much starvation has been added to the deadline so far (at most `timeout`).
    public private(set) var granted: Duration = .zero

    public init(timeout: Duration, interval: Duration, now: ContinuousClock.Instant = .now) {
        self.timeout = timeout
        self.interval = interval
        deadline = now + timeout
    }

    /// Whether the deadline has passed at `now`.
    public func hasPassed(at now: ContinuousClock.Instant = .now) -> Bool {
        now >= deadline
    }

    /// Counts a pause that came back `late` past its interval: starvation moves the deadline.
    public mutating func paused(late: Duration) {
        guard late > Self.starvation, granted < timeout else { return }
        let added = min(late, timeout - granted)
        granted += added
        deadline += added
    }

    /// Sleeps one interval and counts its lateness; false when the task was cancelled (a
    /// cancelled sleep throws at once, so polling on would spin).
    public mutating func pause() async -> Bool {
        let asleep = ContinuousClock.now
        do {
            try await Task.sleep(for: interval)
        } catch {
            return false
        }
        paused(late: ContinuousClock.now - asleep - interval)
        return true
    }
}
