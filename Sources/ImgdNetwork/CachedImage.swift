import ImgdCore
import ImgdStore

/// An image that is in the cache, and where it came from.
public struct CachedImage: Sendable {
    /// Where the bytes were found.
    public enum Source: String, Sendable {
        /// Already on disk before this request.
        case disk
        /// Downloaded for this request (or for a request it was coalesced with).
        case network
    }

    /// The URL asked for (normalised).
    public let url: ImageURL
    /// The entry's key.
    public let key: CacheKey
    /// The file's absolute path.
    public let path: String
    /// Size on disk.
    public let bytes: Int
    /// Where the image came from.
    public let source: Source
    /// What was learned while downloading it; nil when it came from disk.
    public let download: DownloadRecord?
    /// The index row recorded for it: the one the publisher wrote for a download, the one found
    /// for an image on disk; nil when not at hand (a revalidation's `304`). A caller that has it
    /// need not ask the index again.
    public internal(set) var entry: IndexEntry? = nil
    /// The body of a document fetch (``Downloader/fetchDocument(_:limit:submitter:caller:handler:)``),
    /// which is not cached: ``path`` is empty.
    public internal(set) var document: [UInt8]? = nil
}

/// What imgd keeps about one completed download.
public struct DownloadRecord: Sendable, Equatable {
    /// The URL the body came from, after redirects.
    public let finalURL: String
    /// HTTP status of the final response.
    public let status: Int
    /// `ETag`, if the server sent one.
    public let etag: String?
    /// `Last-Modified`, if the server sent one.
    public let lastModified: String?
    /// `Content-Type` as the server declared it (imgd trusts the bytes, not this).
    public let contentType: String?
    /// Body size.
    public let bytes: Int
    /// SHA-256 of the body.
    public let sha256: SHA256Digest
    /// Format and dimensions, read from the image's headers.
    public let image: ImageInfo
    /// Time of the successful attempt, from start to last byte.
    public let duration: Duration
    /// Attempts made, the successful one included.
    public let attempts: Int
    /// What the response said about its lifetime.
    public var freshness: ResponseFreshness = .none
    /// The mirror the body came from (an item's `mirrors` or its host table's), when it was not
    /// the URL asked for; nil when the URL itself served it.
    public var servedBy: String? = nil
}
