import ImgdProtocol
import NIOCore

/// Runs the daemon's commands for the control server. The server parses lines, keeps replies
/// in order and handles `subscribe` itself; every other request, with its peer, comes here.
///
/// Calls for one connection come one at a time, in request order; calls for different
/// connections run concurrently. A call is cancelled (`Task.isCancelled`) when its connection
/// closes or the server's shutdown deadline passes; its result is then dropped.
public protocol ControlCommandHandler: Sendable {
    /// The reply to `request`: a result (usually an object) or an error. A command name the
    /// handler does not know is answered with ``ControlError/unknownCommand(_:)``.
    func handle(_ request: ControlRequest) async -> Result<JSONValue, ControlError>

    /// The reply to `request` when it is ready at once — no download, nothing that waits — or
    /// nil to have ``handle(_:)`` answer it. Called first for every request (through
    /// ``replyAtOnce(_:)``), on the connection's event loop, in request order: it skips the hop
    /// to a task and back (half the cost of a cache hit, measured), so it must be quick and must
    /// never wait on anything slow.
    func answerAtOnce(_ request: ControlRequest) -> Result<JSONValue, ControlError>?

    /// ``answerAtOnce(_:)``'s reply as the line the server writes (Protocol.md's envelope with
    /// the request's `id`), or nil to have ``handle(_:)`` answer. The server calls this one; a
    /// handler may encode a frequent answer straight into the line, skipping the `JSONValue`,
    /// as long as the bytes are those ``answerAtOnce(_:)``'s value would give.
    func replyAtOnce(_ request: ControlRequest) -> ByteBuffer?

    /// The reply to a request that asks for a descriptor (``ControlRequest/wantsDescriptor``),
    /// and the descriptor the server passes with it (nil: none, for an error). The server
    /// asks this instead of ``replyAtOnce(_:)`` and ``handle(_:)`` for such a request.
    func handlePassingDescriptor(_ request: ControlRequest) async -> (Result<JSONValue, ControlError>, PassedDescriptor?)

    /// A command in ``ControlStream/commands``, which takes its connection over (Protocol.md,
    /// "Stream mode"); the server asks this instead of ``handle(_:)`` for one.
    func openStream(_ request: ControlRequest) async -> Result<ControlStream, ControlError>
}

extension ControlCommandHandler {
    /// Nothing is answered at once: every request goes to ``handle(_:)``.
    public func answerAtOnce(_ request: ControlRequest) -> Result<JSONValue, ControlError>? { nil }

    /// No descriptors: ``handle(_:)``'s reply alone.
    public func handlePassingDescriptor(_ request: ControlRequest) async -> (Result<JSONValue, ControlError>, PassedDescriptor?) {
        (await handle(request), nil)
    }

    /// ``answerAtOnce(_:)``'s value, encoded.
    public func replyAtOnce(_ request: ControlRequest) -> ByteBuffer? {
        answerAtOnce(request).map { ControlLine.reply(id: request.id, $0) }
    }
}
