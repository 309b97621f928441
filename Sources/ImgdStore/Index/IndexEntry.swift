import ImgdCore

/// One cache entry as the index records it.
public struct IndexEntry: Sendable, Equatable {
    public var key: CacheKey
    /// The normalised URL the entry was fetched from.
    public var url: String
    /// Size of the file on disk; checked on every read.
    public var bytes: Int
    /// SHA-256 of the file's content.
    public var sha256: SHA256Digest
    public var format: ImageFormat
    public var width: Int?
    public var height: Int?
    public var etag: String?
    public var lastModified: String?
    public var contentType: String?
    /// Wall-clock times, in milliseconds since 1970.
    public var fetchedAt: Int
    public var lastAccess: Int
    public var hitCount: Int
    /// Not evicted by size or age before this time (milliseconds since 1970), when set.
    public var pinnedUntil: Int?
    /// True when the entry was written before an unclean shutdown and its content has not been
    /// verified since: check its SHA-256 before serving it.
    public var needsVerification: Bool
    /// When it was last validated against its origin, and what its response said about its
    /// lifetime (``EntryFreshness``). Rows made before freshness was kept count as validated when
    /// fetched, with no lifetime given.
    public var freshness: EntryFreshness
    /// The uid the entry is charged to (quotas per user): the one whose request first caused it
    /// to be cached. Nil: unowned, charged to nobody (rows from before owners were kept, imgd's
    /// own ready lists, the HTTP face's TCP clients). A row replaced under its key (a refresh)
    /// keeps the owner it had.
    public var owner: UInt32?

    public init(
        key: CacheKey, url: String, bytes: Int, sha256: SHA256Digest, format: ImageFormat, width: Int?, height: Int?,
        etag: String?, lastModified: String?, contentType: String?, fetchedAt: Int, lastAccess: Int,
        hitCount: Int = 0, pinnedUntil: Int? = nil, needsVerification: Bool = false, freshness: EntryFreshness? = nil,
        owner: UInt32? = nil
    ) {
        self.owner = owner
        self.key = key
        self.url = url
        self.bytes = bytes
        self.sha256 = sha256
        self.format = format
        self.width = width
        self.height = height
        self.etag = etag
        self.lastModified = lastModified
        self.contentType = contentType
        self.fetchedAt = fetchedAt
        self.lastAccess = lastAccess
        self.hitCount = hitCount
        self.pinnedUntil = pinnedUntil
        self.needsVerification = needsVerification
        self.freshness = freshness ?? EntryFreshness(validatedAt: fetchedAt)
    }
}
