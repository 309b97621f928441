import ImgdCore

/// Whether a transfer can still finish inside its attempt's time, judged from the rate its body
/// has arrived at so far.
///
/// A "tarpit" answers at once with a large declared length and then trickles: above libcurl's
/// low-speed limit it is never a stall, and it holds its slot for the whole attempt (120 s by
/// default) before failing anyway. Once its body has flowed for ``observation``, a transfer whose
/// remaining bytes at its average rate would need more than the time left (with ``margin``) is
/// ended at once as a timeout, and its slot goes to work that can finish. Time the transfer was
/// held back by `max-rate` (`heldBack`) counts neither in its pace nor against its time.
enum TransferPace {
    /// How long a body must have been arriving before its rate is trusted (TCP's slow start
    /// makes the first moments look slower than the link is).
    static let observation: Duration = .seconds(3)
    /// The projected time may exceed the time left by this factor before the transfer is ended.
    static let margin = 1.25

    /// Why the transfer cannot finish in time, or nil while it still can (or cannot be judged:
    /// no declared length, or too little of the body seen yet).
    static func shortfall(
        received: Int, declared: Int?, bodyStartedAt: ContinuousClock.Instant?, startedAt: ContinuousClock.Instant,
        now: ContinuousClock.Instant, timeout: Duration, heldBack: Duration = .zero
    ) -> String? {
        guard let declared, let bodyStartedAt, received > 0, declared > received else { return nil }
        let flowing = now - bodyStartedAt - heldBack
        guard flowing >= observation else { return nil }
        let bytesPerSecond = Double(received) / flowing.inSeconds
        let needed = Double(declared - received) / bytesPerSecond
        let left = (startedAt + timeout + heldBack - now).inSeconds
        guard needed > max(0, left) * margin else { return nil }
        return "at \(Int(bytesPerSecond)) bytes/s the remaining \(declared - received) of \(declared) declared bytes "
            + "would take \(Int(needed)) s; the attempt's limit leaves \(max(0, Int(left))) s"
    }
}
