/// The name of a cache entry: the SHA-256 of the whole normalised URL.
///
/// Never derived from the URL's last path component or from server headers, so two images
/// called `image.jpg` on different paths never collide and a server cannot choose file names.
public struct CacheKey: Hashable, Sendable, CustomStringConvertible {
    /// The digest this key is made of.
    public let digest: SHA256Digest

    /// The key whose digest is `digest` (as read back from the index).
    public init(digest: SHA256Digest) {
        self.digest = digest
    }

    /// The key of `url`.
    public init(url: ImageURL) {
        digest = SHA256Digest(of: url.normalized.utf8)
    }

    /// 64 lower-case hexadecimal characters.
    public var hex: String { digest.hex }

    /// The entry's path relative to the cache root: `ab/cd/abcd…` (two fan-out levels, so no
    /// folder grows past 65,536 × entries / 65,536 files).
    public var relativePath: String {
        let hex = self.hex
        let first = hex.prefix(2)
        let second = hex.dropFirst(2).prefix(2)
        return "\(first)/\(second)/\(hex)"
    }

    /// The first two digest bytes (`abcd` of `ab/cd/…`), naming the fan-out folder.
    public var fanOutBucket: Int { digest.leadingBytes }

    public var description: String { hex }
}
