import ImgdProtocol

/// One event line: `{"event", "seq", "data"}`, sent after `subscribe`.
public struct ImgdEvent: Sendable {
    /// The event's name: `fetched`, `failed`, `list_done`, …
    public var name: String
    /// Counts events from 1 per daemon run; a gap shows what was missed.
    public var seq: Int
    /// The event's fields.
    public var data: JSONValue
    /// The line as received, for `--json`.
    public var raw: String

    public init(name: String, seq: Int, data: JSONValue, raw: String) {
        self.name = name
        self.seq = seq
        self.data = data
        self.raw = raw
    }
}
