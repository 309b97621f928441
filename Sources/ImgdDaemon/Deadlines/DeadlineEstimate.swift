/// How a list with a deadline stands while it is warmed: what `lists` shows and the `at_risk` /
/// `on_track` events say (``DeadlineTracker``).
public struct DeadlineEstimate: Sendable, Equatable {
    /// When it would finish at the rate observed (wall-clock milliseconds); nil while the rate
    /// is not known yet, or is zero (nothing settles: it would never finish).
    public var eta: Int?
    /// True when the estimate passes the deadline (or nothing settles, or the deadline has
    /// passed with URLs left); false once it recovers with room to spare.
    public var atRisk: Bool
    /// URLs settled (cached or failed) per second, over the last ``DeadlineTracker/rateWindow``;
    /// nil before ``DeadlineTracker/minimumSpan`` of observation.
    public var rate: Double?
    /// URLs left to settle.
    public var remaining: Int
    /// Whether it has the larger share of the transfer slots now (at most one list per owner:
    /// ``SpoolService``'s deadline weights).
    public var boosted = false
}
