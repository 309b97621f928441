/// When and how often a transient failure is tried again.
///
/// Defaults: 3 attempts in all; back-off 0.5 s, 1 s, 2 s… (capped at 30 s) with "equal jitter"
/// (each delay drawn from its upper half, so retries from many URLs spread out); a server's
/// `Retry-After` is honoured up to 120 s.
public struct RetryPolicy: Sendable, Equatable {
    /// Attempts per URL, the first included: 3 by default. 1 disables retries.
    public var maxAttempts: Int = 3
    /// Delay before the second attempt; doubles for each later one.
    public var baseDelay: Duration = .milliseconds(500)
    /// Longest back-off between two attempts.
    public var maxDelay: Duration = .seconds(30)
    /// Longest `Retry-After` honoured; longer requests are clamped to this.
    public var maxRetryAfter: Duration = .seconds(120)

    public init() {}

    /// The delay before attempt `attempt + 1`, after `attempt` attempts failed, given the
    /// server's `Retry-After` if it sent one.
    func delay(afterAttempt attempt: Int, retryAfter: Duration?) -> Duration {
        let exponent = min(max(attempt - 1, 0), 30)
        let backoff = min(maxDelay, baseDelay * (1 << exponent))
        let jittered = backoff * Double.random(in: 0.5...1.0)
        guard let retryAfter else { return jittered }
        return max(jittered, min(retryAfter, maxRetryAfter))
    }
}
