/// The token bucket behind `max-rate`: bytes a second over every transfer it applies to, owned by
/// the engine's loop thread.
///
/// Tokens (bytes) accrue at ``rate`` up to ``burst``; a transfer's write callback takes as many
/// as the bytes libcurl offers while the bucket holds any, and may leave it in debt by that one
/// offer (a libcurl buffer, 16 KiB over HTTP/1.1), so no offer is ever split or refused for
/// being larger than what is left. Once the bucket is at or below zero, offers are refused (the
/// transfer pauses) until the refill brings it above zero again. Over any stretch of time the
/// bytes taken are at most `burst + rate × time` plus one offer per transfer: exact however
/// many transfers share it.
///
/// The burst is ``burstTime`` of the rate: small, so that a cap holds over short measures too (a
/// second's burst would let 20 MB at 4 MB/s finish in 4 s instead of 5), and large enough that a
/// loop turn late by less than that on a loaded machine loses nothing of the rate (tokens past
/// the burst are lost).
struct BandwidthBucket {
    /// Bytes a second; nil is no cap (every offer is taken, nothing is counted).
    private(set) var rate: Int?
    /// Bytes available now; negative after an offer larger than what was left.
    private(set) var tokens: Double
    private var refilledAt: ContinuousClock.Instant

    /// The most tokens held: this much time at the rate.
    static let burstTime = 0.25

    init(rate: Int?, now: ContinuousClock.Instant = .now) {
        self.rate = rate.flatMap { $0 > 0 ? $0 : nil }
        refilledAt = now
        tokens = self.rate.map { Self.burst(of: $0) } ?? 0
    }

    /// The most tokens the bucket holds at `rate` (at least one byte).
    static func burst(of rate: Int) -> Double { max(1, Double(rate) * burstTime) }

    /// Whether `bytes` may be received now; if so they are taken.
    mutating func take(_ bytes: Int, now: ContinuousClock.Instant) -> Bool {
        guard rate != nil else { return true }
        refill(now: now)
        guard tokens > 0 else { return false }
        tokens -= Double(bytes)
        return true
    }

    /// Whether an offer would be taken now (tokens above zero, or no cap).
    mutating func hasTokens(now: ContinuousClock.Instant) -> Bool {
        guard rate != nil else { return true }
        refill(now: now)
        return tokens > 0
    }

    /// How long until the bucket is above zero again: zero when it is, or there is no cap.
    mutating func waitForTokens(now: ContinuousClock.Instant) -> Duration {
        guard let rate else { return .zero }
        refill(now: now)
        guard tokens <= 0 else { return .zero }
        // One byte past zero: the offer after this wait is taken.
        return .seconds((1 - tokens) / Double(rate))
    }

    /// A new cap (a reload), from now on: what accrued at the old rate is kept, within the new
    /// burst; nil or 0 lifts the cap.
    mutating func setRate(_ newRate: Int?, now: ContinuousClock.Instant) {
        let newRate = newRate.flatMap { $0 > 0 ? $0 : nil }
        guard newRate != rate else { return }
        let wasCapped = rate != nil
        refill(now: now)
        rate = newRate
        if let newRate {
            // From no cap, the bucket starts full; debt is kept, so the bytes already let through
            // are paid for at the new rate.
            tokens = wasCapped ? min(tokens, Self.burst(of: newRate)) : Self.burst(of: newRate)
        } else {
            tokens = 0
        }
    }

    private mutating func refill(now: ContinuousClock.Instant) {
        defer { refilledAt = max(refilledAt, now) }
        guard let rate, now > refilledAt else { return }
        let elapsed = (now - refilledAt).inSeconds
        tokens = min(Self.burst(of: rate), tokens + elapsed * Double(rate))
    }
}
