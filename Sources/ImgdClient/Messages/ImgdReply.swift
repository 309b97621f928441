import ImgdProtocol

/// One reply line: `{"id", "ok": true, "result"}` or `{"id", "ok": false, "error": {"code", "message"}}`.
public struct ImgdReply: Sendable {
    /// The `id` echoed by the daemon (`null` when it could not read the request's).
    public var id: JSONValue
    /// The `result` object of a success; `null` for a failure.
    public var result: JSONValue
    /// The `error` of a failure: its `code` and `message`.
    public var error: (code: String, message: String)?
    /// The line as received, for `--json`.
    public var raw: String
    /// The read-only descriptor the daemon passed with this line (`get` with `"fd": true`), owned
    /// by the reply: closed when the last copy of the reply goes, unless taken first.
    public var descriptor: ImgdDescriptor?

    public init(id: JSONValue, result: JSONValue, error: (code: String, message: String)?, raw: String, descriptor: ImgdDescriptor? = nil) {
        self.id = id
        self.result = result
        self.error = error
        self.raw = raw
        self.descriptor = descriptor
    }

    public var isSuccess: Bool { error == nil }
}
