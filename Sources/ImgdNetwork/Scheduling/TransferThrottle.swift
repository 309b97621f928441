/// A transfer's dealings with `max-rate` (``BandwidthBucket``): whether it is paused for the cap
/// now, how long it has been held back in all, and the time limits the engine judges for it once
/// it has been.
///
/// libcurl's own limits count wall-clock time: its low-speed check (`CURLOPT_LOW_SPEED_LIMIT`
/// for `_TIME`) measures a speed averaged over the last seconds, paused ones included, and its
/// `CURLOPT_TIMEOUT_MS` runs on through a pause. A transfer sharing a low cap with many others
/// would fail as stalled or timed out for imgd's own throttling. So once a transfer is first held
/// back, the engine turns those two off on its handle and judges them itself, on the time the
/// transfer was allowed to receive (``runTime(startedAt:now:)``): the attempt's limit, and a stall
/// of fewer than `lowSpeedLimit × lowSpeedTime` bytes over `lowSpeedTime` of that time.
struct TransferThrottle {
    /// When the current pause for the cap began; nil while the transfer may receive.
    private(set) var pausedSince: ContinuousClock.Instant?
    /// Time held back by the cap in pauses that have ended.
    private(set) var heldBack: Duration = .zero
    /// Set once the engine judges the transfer's time limits instead of libcurl.
    var isGoverned = false
    /// Bytes libcurl's write callback handed over (body, or an error page), counted for the
    /// stall check.
    private(set) var bytesTaken = 0
    /// The stall check's last mark: the bytes taken and the run time then.
    private var markBytes = 0
    private var markRunTime: Duration = .zero

    var isPaused: Bool { pausedSince != nil }

    mutating func pause(now: ContinuousClock.Instant) {
        if pausedSince == nil { pausedSince = now }
    }

    mutating func resume(now: ContinuousClock.Instant) {
        guard let since = pausedSince else { return }
        heldBack += max(.zero, now - since)
        pausedSince = nil
    }

    mutating func took(_ bytes: Int) { bytesTaken += bytes }

    /// Time held back by the cap up to `now`, the current pause included.
    func heldBack(now: ContinuousClock.Instant) -> Duration {
        heldBack + (pausedSince.map { max(.zero, now - $0) } ?? .zero)
    }

    /// Time since `startedAt` that the transfer was not held back by the cap.
    func runTime(startedAt: ContinuousClock.Instant, now: ContinuousClock.Instant) -> Duration {
        max(.zero, now - startedAt - heldBack(now: now))
    }

    /// For a governed transfer: why it has failed its limits on the time it was allowed to
    /// receive (over the attempt's `timeout`, or stalled), or nil. Moves the stall mark on when
    /// enough bytes came.
    mutating func limitReached(
        startedAt: ContinuousClock.Instant, now: ContinuousClock.Instant, timeout: Duration,
        lowSpeedLimit: Int, lowSpeedTime: Duration
    ) -> String? {
        let run = runTime(startedAt: startedAt, now: now)
        if run > timeout {
            return "the attempt ran for more than \(timeout.components.seconds) s (time held back by max-rate not counted)"
        }
        guard lowSpeedLimit > 0, lowSpeedTime > .zero else { return nil }
        let wanted = Double(lowSpeedLimit) * lowSpeedTime.inSeconds
        if Double(bytesTaken - markBytes) >= wanted {
            markBytes = bytesTaken
            markRunTime = run
            return nil
        }
        guard run - markRunTime >= lowSpeedTime else { return nil }
        return "fewer than \(lowSpeedLimit) bytes/s over the last \(lowSpeedTime.components.seconds) s it was allowed "
            + "to receive (time held back by max-rate not counted)"
    }
}
