import ImgdCore
import Logging

/// Logs the downloader's fallbacks from the tier to the origins without a line per URL: the first
/// fallback for each cause (`502 upstream`, `no answer (connect)`, …) is logged at once, later ones
/// for that cause at most once a minute, with how many there were meanwhile. A tier that is down
/// would otherwise log every URL of every list.
final class TierFallbackLog: Sendable {
    /// The least time between two lines for one cause.
    static let interval: Duration = .seconds(60)
    /// Causes remembered at most (a tier's reason is its own text): past it they start afresh.
    static let maxCauses = 64

    private struct Cause {
        var loggedAt: ContinuousClock.Instant
        /// Fallbacks since the last line.
        var since: Int
    }

    private let logger: Logger
    /// Each cause's last line and count since; called on the transfer engine's thread.
    private let causes = Locked([String: Cause]())

    init(logger: Logger) { self.logger = logger }

    /// Causes remembered now.
    var causeCount: Int { causes.withLock { $0.count } }

    /// One fallback from `tier` for `cause`.
    func note(tier: String, cause: String, now: ContinuousClock.Instant = .now) {
        let line: String? = causes.withLock { causes in
            if causes[cause] == nil, causes.count >= Self.maxCauses { causes = [:] }
            guard var entry = causes[cause] else {
                causes[cause] = Cause(loggedAt: now, since: 0)
                return "tier \(tier): \(cause); fetching from the origin directly (tier-fallback; logged once a minute per cause)"
            }
            entry.since += 1
            guard now - entry.loggedAt >= Self.interval else {
                causes[cause] = entry
                return nil
            }
            causes[cause] = Cause(loggedAt: now, since: 0)
            return "tier \(tier): \(cause) again, \(entry.since) times since the last message; fetching from the origin directly"
        }
        if let line { logger.warning("\(line)") }
    }
}
