import ImgdProtocol
import NIOCore

/// Stream mode (Protocol.md): `export`, `import` and `manifest` take their connection over. The
/// line decoder is switched to raw bytes as soon as the request's line is read (inside the
/// decoder's own call, so what the client sent after it is never cut into lines), and a
/// ``ControlStreamHandler`` placed after this handler does the rest; this handler then only
/// passes the bytes and the half-close on, and never writes again.
extension ControlConnectionHandler {
    /// A stream command's line was read. It must be alone: nothing running or waiting before
    /// it and no subscription, whose output would mix with the stream's. Otherwise it is
    /// refused and the connection closes (what followed it may be tar bytes, not requests).
    func acceptStream(_ request: ControlRequest) {
        streamSwitch.isRaw = true
        guard !isRunning, pending.isEmpty, subscription == nil else {
            waitingRequests -= 1
            state.endInput()
            let reason = "\(request.command) takes its connection over: send it on a connection of its own, first, with no other request waiting and no subscription"
            hold(ControlLine.error(.badRequest(reason), id: request.id), closeAfter: true)
            return
        }
        pending.append(.request(request))
    }

    /// Hands the connection to a ``ControlStreamHandler`` for `request`.
    func startStream(_ request: ControlRequest, context: ChannelHandlerContext) {
        waitingRequests -= 1
        streamSwitch.isRaw = true
        // Parsed late (read while the output was backed up): lines read after it may already
        // wait as requests, so it cannot have the connection.
        guard pending.isEmpty, subscription == nil else {
            let reason = "\(request.command) takes its connection over: send it on a connection of its own, first, with no other request waiting and no subscription"
            write(ControlLine.error(.badRequest(reason), id: request.id), isEvent: false)
            pending.removeAll()
            closeAfterFlush()
            return
        }
        streaming = true
        idleTimer?.cancel()
        idleTimer = nil
        // What was collected (nothing but earlier replies, which acceptStream rules out) goes first.
        sendOutbox()
        let stream = ControlStreamHandler(request: request, handler: settings.handler, limits: limits, logger: logger)
        do {
            try context.pipeline.syncOperations.addHandler(stream, position: .after(self))
        } catch {
            close()
        }
    }
}
