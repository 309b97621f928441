import ImgdProtocol

/// What a `get` asks for besides its URL (Protocol.md, *get*). The defaults are the daemon's.
public struct GetOptions: Sendable, Equatable {
    /// Download the image when it is not cached (`fetch`, true by default).
    public var fetch: Bool
    /// The bytes in the reply, base64 (`data`, false by default; up to the daemon's `max-data-bytes`).
    public var data: Bool
    /// A read-only descriptor of the entry's file passed with the reply (`fd`, false by
    /// default; needs the daemon's `fd` feature). The reply's `sha256` and `bytes` describe
    /// exactly the file the descriptor reads, whatever happens to the cache afterwards.
    public var descriptor: Bool
    /// The key to store the image under (`key`), instead of the URL's.
    public var key: String?
    /// The SHA-256 the image must have (`sha256`, 64 hex digits).
    public var sha256: String?

    public init(fetch: Bool = true, data: Bool = false, descriptor: Bool = false, key: String? = nil, sha256: String? = nil) {
        self.fetch = fetch
        self.data = data
        self.descriptor = descriptor
        self.key = key
        self.sha256 = sha256
    }

    /// The request's members besides `cmd` and `id`.
    func arguments(url: String) -> [String: JSONValue] {
        var arguments: [String: JSONValue] = ["url": .string(url)]
        if !fetch { arguments["fetch"] = .bool(false) }
        if data { arguments["data"] = .bool(true) }
        if descriptor { arguments["fd"] = .bool(true) }
        if let key { arguments["key"] = .string(key) }
        if let sha256 { arguments["sha256"] = .string(sha256) }
        return arguments
    }
}
