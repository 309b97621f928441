import ImgdProtocol
import NIOCore

/// A command that takes its connection over after its request line (Protocol.md, "Stream
/// mode"): `export` and `manifest` send raw bytes after their reply line, `import` receives
/// raw bytes before its reply line; then the connection closes.
public enum ControlStream: Sendable {
    /// The daemon sends `reply` as a line, then the chunks of `source` until it ends, then closes.
    case sending(reply: JSONValue, source: any ControlStreamSource)
    /// The client sends bytes until it half-closes; each goes to `sink`, whose `finish` makes
    /// the reply line sent before the connection closes.
    case receiving(sink: any ControlStreamSink)

    /// The commands that take their connection over.
    public static let commands: Set<String> = ["export", "import", "manifest"]
}

/// Where a sending stream's bytes come from, one chunk at a time (the next is asked for once the
/// last was written: memory stays bounded by one chunk whatever the client's pace).
public protocol ControlStreamSource: Sendable {
    /// The next chunk, or nil at the end. A throw ends the stream early (the client sees it cut).
    func next() async throws -> ByteBuffer?
    /// The connection went away before the end: let go of what is held.
    func abandon() async
}

/// Where a receiving stream's bytes go. Calls come one at a time, in order; reading waits
/// while one runs.
public protocol ControlStreamSink: Sendable {
    /// The next bytes the client sent.
    func consume(_ bytes: ByteBuffer) async
    /// The client half-closed: the reply.
    func finish() async -> JSONValue
    /// The connection went away before the end: let go of what is held.
    func abandon() async
}

extension ControlCommandHandler {
    /// No stream commands: they are unknown.
    public func openStream(_ request: ControlRequest) async -> Result<ControlStream, ControlError> {
        .failure(.unknownCommand(request.command))
    }
}
