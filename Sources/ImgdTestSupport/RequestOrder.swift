import NIOConcurrencyHelpers

/// The order in which requests arrived over several ``TestHTTPServer``s (each its own
/// host:port): which host a client asked first, seen by the servers themselves rather than
/// inferred from how long the client took.
///
/// Every server started with the log appends a request's target when its head arrives; one lock
/// orders the appends of all of them.
public final class RequestOrder: Sendable {
    private let targets = NIOLockedValueBox<[String]>([])

    public init() {}

    /// The target (path and query) of every request so far, over every server sharing the log,
    /// in order of arrival.
    public var all: [String] { targets.withLockedValue { $0.ownedCopy() } }

    func append(_ target: String) {
        targets.withLockedValue { $0.append(target) }
    }
}
