import ImgdCore

/// What became of one arrived body.
struct PublishOutcome: Sendable {
    let key: CacheKey
    let jobSerial: UInt64
    let result: Result<CachedImage, DownloadError>
}
