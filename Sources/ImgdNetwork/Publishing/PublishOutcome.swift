import ImgdCore

/// What became of one arrived body.
struct PublishOutcome: Sendable {
    let key: CacheKey
    let jobSerial: UInt64
    let result: Result<CachedImage, DownloadError>
    /// The outcome of a `304`: the entry's freshness was renewed, its file left as it was.
    var revalidated = false
}
