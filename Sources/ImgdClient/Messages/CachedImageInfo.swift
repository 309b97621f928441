import ImgdProtocol

/// A successful `get`: where the image is cached and what it is.
public struct CachedImageInfo: Sendable {
    /// The entry's file (readable by members of the cache folder's group; see ``file``).
    public var path: String
    /// Its size in bytes.
    public var bytes: Int
    /// Its SHA-256, 64 lowercase hex digits.
    public var sha256: String
    /// Which tier answered: `memory`, `disk` or `network`.
    public var source: String
    /// The whole `result` object, for the fields not named here (`format`, `width`, …).
    public var result: JSONValue
    /// The read-only descriptor of the file, when asked for (``GetOptions/descriptor``) and the
    /// daemon passed one: it reads exactly ``bytes`` bytes whose SHA-256 is ``sha256``, even
    /// after the entry is evicted or replaced. Closed when the last copy of this value goes.
    public var file: ImgdDescriptor?

    /// Reads a `get` result; throws ``ImgdClientError/badReply(_:)`` when a field is missing.
    public init(result: JSONValue, file: ImgdDescriptor?) throws(ImgdClientError) {
        guard let path = result["path"]?.stringValue, let bytes = result["bytes"]?.intValue,
            let sha256 = result["sha256"]?.stringValue
        else {
            throw .badReply("get: no \"path\", \"bytes\" or \"sha256\" in \(ImgdMessage.excerpt(result.jsonText))")
        }
        self.path = path
        self.bytes = bytes
        self.sha256 = sha256
        source = result["source"]?.stringValue ?? ""
        self.result = result
        self.file = file
    }
}
