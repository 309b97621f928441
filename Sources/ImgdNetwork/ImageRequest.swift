import ImgdCore

/// One image asked of the ``Downloader``: the URL fetched, the key its entry is stored under
/// (the URL's own, one that leaves out a signature — ``CacheKeyPolicy`` — or one the caller
/// chose), and optionally the digest its body must have.
///
/// Requests are coalesced by key: two URLs that differ only in their signature, or two items
/// that chose one key, share one download and one entry.
public struct ImageRequest: Sendable, Hashable {
    /// What is fetched.
    public let url: ImageURL
    /// The entry's name.
    public let key: CacheKey
    /// The SHA-256 the body must have (`checksum_mismatch` otherwise); an entry already cached
    /// under ``key`` counts only if it has this digest.
    public let expectedSHA256: SHA256Digest?
    /// Its own priority, over the one of the call that makes it (an item of a list or an `add`
    /// marked `high`).
    public var priority: FetchPriority?
    /// Its own freshness rule, over the downloader's (a request's, an item's or a list's
    /// `refresh`): a cached entry due under it is served and revalidated.
    public var refresh: RefreshRule?
    /// Other URLs of the same image (an item's `mirrors`), tried after ``url`` when it fails in
    /// a way a mirror can cure; the entry keeps ``key`` whichever serves it.
    public var mirrors: [ImageURL] = []

    /// A request for `url` stored under `key` (by default the hash of the whole URL).
    public init(url: ImageURL, key: CacheKey? = nil, expectedSHA256: SHA256Digest? = nil, priority: FetchPriority? = nil) {
        self.url = url
        self.key = key ?? url.cacheKey
        self.expectedSHA256 = expectedSHA256
        self.priority = priority
    }
}
