import ImgdProtocol

/// One event line: `{"event", "seq", "data"}`, sent after `subscribe`.
struct ControlEvent: Sendable {
    /// The event's name: `fetched`, `failed`, `list_done`, …
    var name: String
    /// Counts events from 1 per daemon run; a gap shows what was missed.
    var seq: Int
    /// The event's fields.
    var data: JSONValue
    /// The line as received, for `--json`.
    var raw: String
}
