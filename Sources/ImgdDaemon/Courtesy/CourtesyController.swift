/// The courtesy loop's rule, additive increase and multiplicative decrease, as a value: given
/// the stall share read now, the prefetch cap to run with.
///
/// - Over the threshold: the cap is halved (not below 1), then held for ``holdAfterDecrease``,
///   the span `avg10` averages over, so one burst of pressure is not answered twice.
/// - At or under it: the cap grows by one a reading, back up to `max-parallel`.
/// - No reading (a file gone or unreadable): the cap stays as it is.
struct CourtesyController: Sendable, Equatable {
    /// How long a decrease is held before another: `avg10` needs about that long to show it.
    static let holdAfterDecrease: Duration = .seconds(10)

    /// The prefetch cap in force.
    private(set) var limit: Int
    /// Whether pressure lowered it and it has not climbed back to `max-parallel` since: a cap not
    /// lowered follows `max-parallel` wherever it goes (a window opened with a higher one).
    private var isLowered = false
    private var lastDecrease: ContinuousClock.Instant?

    init(cap: Int) { limit = cap }

    /// Takes one reading (`share`, percent; nil when none could be read) against `threshold`
    /// with `cap` (the `max-parallel` in force) and returns the new cap.
    mutating func step(share: Double?, threshold: Double, cap: Int, now: ContinuousClock.Instant) -> Int {
        limit = isLowered ? min(limit, cap) : cap
        guard let share else { return limit }
        if share > threshold {
            if lastDecrease.map({ now - $0 >= Self.holdAfterDecrease }) ?? true {
                limit = max(1, limit / 2)
                isLowered = true
                lastDecrease = now
            }
        } else {
            limit = min(cap, limit + 1)
            if limit >= cap { isLowered = false }
        }
        return limit
    }

    /// Back to `cap` at once (the loop turned off).
    mutating func reset(cap: Int) {
        limit = cap
        isLowered = false
        lastDecrease = nil
    }
}
