import NIOConcurrencyHelpers

/// Counts requests in flight across several ``TestHTTPServer``s (each its own host:port), and
/// the most there ever were at once: a client's global cap, seen by the servers themselves.
///
/// Every server started with the gauge enters it when a request head arrives and leaves it when
/// that request's response ends or its connection closes, under the same rules as the server's
/// own ``TestHTTPServer/inFlight``. One lock guards the two counts.
public final class InFlightGauge: Sendable {
    private let counts = NIOLockedValueBox((current: 0, peak: 0))

    public init() {}

    /// Requests in flight now, over every server sharing the gauge.
    public var current: Int { counts.withLockedValue { $0.current } }

    /// The most requests in flight at once since the gauge was made.
    public var peak: Int { counts.withLockedValue { $0.peak } }

    func enter() {
        counts.withLockedValue { counts in
            counts.current += 1
            counts.peak = max(counts.peak, counts.current)
        }
    }

    func leave() {
        counts.withLockedValue { $0.current -= 1 }
    }
}
