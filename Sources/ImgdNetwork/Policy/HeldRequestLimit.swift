import ImgdCore

/// How much held work a bounded request may take the downloader to (``Downloader/heldRequests``
/// and ``Downloader/heldRequestBytes``), in all and for one caller.
public struct HeldRequestLimit: Sendable, Equatable {
    /// Requests held at most: 100,000 by default (the daemon's `max-queued`).
    public var requests: Int
    /// Bytes of their URLs at most (each counts its URL's, up to 8 KiB): 64 MiB by default (the
    /// daemon's `max-queued-bytes`). The count alone let 100,000 URLs of 8 KiB hold ~800 MB.
    public var bytes: Int
    /// Requests one caller (a uid) may hold at most: all of ``requests`` by default (no share).
    /// The daemon gives each member a share (`max-queued-share`), so that one member's flood
    /// refuses that member before it refuses anyone else.
    public var callerRequests: Int
    /// Bytes of one caller's requests' URLs at most: all of ``bytes`` by default.
    public var callerBytes: Int

    public init(requests: Int = 100_000, bytes: Int = 64 << 20) {
        self.requests = requests
        self.bytes = bytes
        callerRequests = requests
        callerBytes = bytes
    }

    /// The same bounds with each caller held to `percent` of them (at least one request and
    /// the bytes of one longest URL, so a share never refuses everything).
    public func sharing(percent: Int) -> HeldRequestLimit {
        var limit = self
        limit.callerRequests = max(1, requests * percent / 100)
        limit.callerBytes = max(ImageURL.maximumLength, bytes / 100 * percent)
        return limit
    }

    /// Whether holding `requests` more of `bytes` stays within the bounds for all, with
    /// `held` held now.
    func admits(_ requests: Int, bytes: Int, held: (requests: Int, bytes: Int)) -> Bool {
        held.requests + requests <= self.requests && held.bytes + bytes <= self.bytes
    }

    /// Whether a caller holding `held` now may hold `requests` more of `bytes`.
    func admitsCaller(_ requests: Int, bytes: Int, held: (requests: Int, bytes: Int)) -> Bool {
        held.requests + requests <= callerRequests && held.bytes + bytes <= callerBytes
    }
}
