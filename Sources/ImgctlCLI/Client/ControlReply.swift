import ImgdProtocol

/// One reply line: `{"id", "ok": true, "result"}` or `{"id", "ok": false, "error": {"code", "message"}}`.
struct ControlReply: Sendable {
    /// The `id` echoed by the daemon (`null` when it could not read the request's).
    var id: JSONValue
    /// The `result` object of a success; `null` for a failure.
    var result: JSONValue
    /// The `error` of a failure: its `code` and `message`.
    var error: (code: String, message: String)?
    /// The line as received, for `--json`.
    var raw: String

    var isSuccess: Bool { error == nil }
}
