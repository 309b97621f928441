import ImgdBase

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

    /// The key of a URL already in its normalised form (``ImageURL/normalized``, as the state
    /// database stores a list's URLs): the same key, without parsing the URL again.
    public init(normalizedURL: String) {
        digest = SHA256Digest(of: normalizedURL.utf8)
    }

    /// 64 lower-case hexadecimal characters.
    public var hex: String { digest.hex }

    /// The entry's path relative to the cache root: `ab/abcd…`, in one of 256 fan-out folders
    /// named by the digest's first byte. One level, like nginx's `levels=2`: the folders all
    /// exist from the start, so no publish ever creates one (two levels meant 65,536 folders,
    /// most made by a publish of their first file), and ext4's hashed directories keep lookups
    /// fast with thousands of files in each (a million entries put about 3,900 in each).
    public var relativePath: String {
        let hex = self.hex
        return "\(hex.prefix(2))/\(hex)"
    }

    /// Calls `body` with ``relativePath`` as a C string built on the stack: for the `fstatat`
    /// of every lookup, which should not allocate two strings to name a file.
    public func withRelativePath<Result>(_ body: (UnsafePointer<CChar>) throws -> Result) rethrows -> Result {
        // "ab/" + 64 hex digits + NUL.
        try withUnsafeTemporaryAllocation(of: CChar.self, capacity: 68) { path in
            digest.writeHex(into: UnsafeMutableRawPointer(path.baseAddress!).advanced(by: 3).assumingMemoryBound(to: UInt8.self))
            path[0] = path[3]
            path[1] = path[4]
            path[2] = CChar(UInt8(ascii: "/"))
            path[67] = 0
            return try body(path.baseAddress!)
        }
    }

    /// The first digest byte (`ab` of `ab/…`), naming the fan-out folder: 0…255.
    public var fanOutBucket: Int { digest.leadingBytes >> 8 }

    public var description: String { hex }
}

extension CacheKey {
    /// The key `owner` (a uid) chose for an image (an object link list's `key`, an `add` or a
    /// `get` with `key`): any string, in a namespace of its own per owner.
    ///
    /// The text hashed is `imgd-key:<uid>:<text>`. A URL's key hashes its normalised form,
    /// which starts with `http:` or `https:`, so no chosen key can name a URL's entry (a member
    /// choosing `key = "http://victim/good.png"` gets an entry of their own, not the victim
    /// URL's); and the uid keeps one member's chosen keys apart from another's, so a member
    /// naming another's key, with or without another `sha256`, never replaces what the other's
    /// lists rely on. The uid is written in decimal and ends at the first `:`, so no pair of
    /// owner and text hashes the same as another pair.
    public init(chosen text: String, owner: UInt32) {
        self.init(normalizedURL: "imgd-key:\(owner):\(text)")
    }
}
