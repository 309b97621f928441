import DequeModule

/// Estimates when a list with a deadline will finish, from the rate its URLs settle at, and says
/// when that estimate crosses the deadline: the list is then at risk, and is given a larger share
/// of the transfer slots (``boostWeight``) until it finishes or its deadline passes.
///
/// - **Rate:** URLs settled (cached, found cached, or failed) over the last ``rateWindow``
///   (samples taken at each ``update(now:remaining:)``, once a second), so a list that slows
///   down is seen within seconds, and one burst of cached URLs is not taken for its pace. No
///   estimate is made before ``minimumSpan`` of observation.
/// - **At risk:** when the estimate (now + remaining / rate) passes the deadline, when nothing
///   settled for 10% of the time left (at least ``minimumSpan``: a slow first transfer a day
///   before the deadline is no risk), or when the deadline passes with URLs left.
/// - **On track again:** only when the estimate is back before the deadline by a margin (10% of
///   the time left, at least 2 s), so a list hovering at its deadline does not send an event a
///   second.
/// - **The boost stays** once given, until the list finishes or its deadline passes: its
///   recovery is owed to the larger share, and taking it back at once would put it at risk
///   again (and swing the other lists' share with it). After the deadline a late list goes back
///   to an equal share: a deadline cannot be met any more, and a member's list with a deadline
///   in the past must not keep more than its share for as long as it runs.
///
/// Pure state driven by its caller's clock (wall-clock milliseconds), so it is tested exactly.
struct DeadlineTracker {
    /// How far back the rate looks.
    static let rateWindow = 30_000
    /// Observation needed before an estimate (and before a zero rate counts as a risk).
    static let minimumSpan = 3_000
    /// The weight of a list at risk among the lists taking turns for slots (one without a
    /// deadline, or on track, weighs 1): four turns for one, four times the fair share.
    static let boostWeight = 4

    /// The deadline, wall-clock milliseconds.
    let readyBy: Int
    /// URLs settled since the tracker began (the caller counts its answers).
    private(set) var settled = 0
    /// (time, settled) at each update, the last ``rateWindow`` of them.
    private var samples = Deque<(at: Int, settled: Int)>()
    /// Since when nothing has settled (the first update, or the last one that saw a URL settle).
    private var quietSince: Int?
    private var settledAtLastUpdate = 0
    private(set) var estimate: DeadlineEstimate
    /// Whether the list was ever at risk before its deadline: it keeps the larger share.
    private(set) var isBoosted = false

    /// What an update changed, for the events.
    enum Change: Equatable {
        case atRisk
        case onTrack
    }

    init(readyBy: Int, remaining: Int) {
        self.readyBy = readyBy
        estimate = DeadlineEstimate(eta: nil, atRisk: false, rate: nil, remaining: remaining)
    }

    /// One URL settled.
    mutating func settle() { settled += 1 }

    /// The weight its submitter should have now.
    func weight(now: Int) -> Int { isBoosted && now < readyBy ? Self.boostWeight : 1 }

    /// Forgets the samples (the list was paused: its rate while paused says nothing).
    mutating func restartRate() {
        samples.removeAll()
        quietSince = nil
    }

    /// Takes a sample at `now` with `remaining` URLs left, updates the estimate, and says
    /// whether the list just became at risk or recovered.
    mutating func update(now: Int, remaining: Int) -> Change? {
        samples.append((now, settled))
        if quietSince == nil || settled != settledAtLastUpdate { quietSince = now }
        settledAtLastUpdate = settled
        while let first = samples.first, now - first.at > Self.rateWindow, samples.count > 2 { samples.removeFirst() }
        let span = now - samples.first!.at
        var next = DeadlineEstimate(eta: nil, atRisk: estimate.atRisk, rate: nil, remaining: remaining)
        if span >= Self.minimumSpan {
            let rate = Double(settled - samples.first!.settled) * 1000 / Double(span)
            next.rate = rate
            if rate > 0 { next.eta = now + Int((Double(remaining) / rate * 1000).rounded(.up)) }
        }
        // Nothing settled for 10% of the time left (at least 3 s): a list that has not started to
        // move is at risk only once its silence is long enough to matter for its deadline.
        let stalled = remaining > 0 && now - quietSince! >= max(Self.minimumSpan, (readyBy - now) / 10)
        if stalled { next.eta = nil }
        if remaining == 0 {
            // Settled: the list finishes now, and its report says whether in time.
        } else if now >= readyBy || stalled || (next.eta ?? 0) > readyBy {
            next.atRisk = true
        } else if let eta = next.eta, eta <= readyBy - max(2_000, (readyBy - now) / 10) {
            next.atRisk = false
        }
        let change: Change? = next.atRisk == estimate.atRisk ? nil : (next.atRisk ? .atRisk : .onTrack)
        if next.atRisk, now < readyBy { isBoosted = true }
        estimate = next
        return change
    }
}
