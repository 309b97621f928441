/// How much a bounded ``Downloader/prefetch(_:submitter:priority:limit:handler:)`` may take the
/// downloader's held requests to: a count, and the bytes of their URLs (see
/// ``Downloader/heldRequests`` and ``Downloader/heldRequestBytes``).
public struct HeldRequestLimit: Sendable, Equatable {
    /// Requests held at most: 100,000 by default (the daemon's `max-queued`).
    public var requests: Int
    /// Bytes of their URLs at most (each counts its URL's, up to 8 KiB): 64 MiB by default (the
    /// daemon's `max-queued-bytes`). The count alone let 100,000 URLs of 8 KiB hold ~800 MB.
    public var bytes: Int

    public init(requests: Int = 100_000, bytes: Int = 64 << 20) {
        self.requests = requests
        self.bytes = bytes
    }
}
