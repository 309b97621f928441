/// How much a bounded ``Downloader/prefetch(_:submitter:priority:limit:handler:)`` may take the
/// downloader's held requests to: a count, and the bytes of their URLs (see
/// ``Downloader/heldRequests`` and ``Downloader/heldRequestBytes``).
public struct HeldRequestLimit: Sendable, Equatable {
    /// Requests held at most.
    public var requests: Int
    /// Bytes of their URLs at most.
    public var bytes: Int

    public init(requests: Int, bytes: Int) {
        self.requests = requests
        self.bytes = bytes
    }
}
