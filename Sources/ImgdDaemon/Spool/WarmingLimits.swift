import ImgdCore
import ImgdNetwork

/// How many claimed lists are warmed at once, and how many of their URLs the downloader holds
/// for them: what keeps the daemon's memory bounded however many lists are dropped.
///
/// A list being warmed hands the downloader a window of its URLs at a time; each URL held
/// costs memory (its token, its URL, its share of a job) until it is answered, and one that
/// never answers holds it for the whole timeout. So the lists warmed at once are capped, and
/// their windows together fit within the same bounds as every other held request
/// (``HeldRequestLimit``, `max-queued` and `max-queued-bytes`): lists beyond the cap wait,
/// claimed (their URLs are in the state database, not in memory), and start in turn.
public struct WarmingLimits: Sendable, Equatable {
    /// Lists warmed at once, at most (`max-active-lists`; 16 by default). The others wait in
    /// claim order.
    public var maxActiveLists = 16
    /// The held requests the lists' windows share, at most (`max-queued`; 100,000 by default).
    public var maxQueued = HeldRequestLimit().requests
    /// The bytes of their URLs, at most (`max-queued-bytes`; 64 MiB by default).
    public var maxQueuedBytes = HeldRequestLimit().bytes

    /// URLs of one list handed to the downloader and not yet answered, at most, when the bounds
    /// leave room: 512 (enough to keep every transfer slot busy, small enough to refill often).
    static let fullWindow = 512

    public init() {}

    /// Lists warmed at once: `maxActiveLists`, but no more than leave each one room for one URL
    /// of the longest kind (``ImageURL/maximumLength``) within both bounds, so every active list
    /// always makes progress and the windows together never exceed them.
    var activeLists: Int {
        max(1, min(maxActiveLists, maxQueued, maxQueuedBytes / ImageURL.maximumLength))
    }

    /// URLs one active list holds at most: its share of `maxQueued`, at most ``fullWindow``.
    var window: Int { max(1, min(Self.fullWindow, maxQueued / activeLists)) }

    /// Bytes of URLs (as the downloader counts them: the normalised URL's) one active list
    /// holds at most: its share of `maxQueuedBytes`.
    var windowBytes: Int { max(ImageURL.maximumLength, maxQueuedBytes / activeLists) }
}
