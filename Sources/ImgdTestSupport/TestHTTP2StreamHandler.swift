import NIOCore
import NIOHTTP1

/// Serves one HTTP/2 stream of a ``TestHTTPServer`` (one request), after NIOHTTP2's codec has
/// turned its frames into HTTP/1-style parts. It runs the same routes and the same delivery
/// script as ``TestHTTPHandler``, in the forms HTTP/2 allows: `gate`, `delay_ms`, `slow_bps`,
/// `stall_after` (the stream stays open) and `close_after` (the stream is reset; the connection
/// and its other streams go on). A `cl=±K` lie is sent as a `content-length` header that does not
/// match the DATA frames; `no_cl=1` and `chunked=1` send no length (HTTP/2 frames every body).
final class TestHTTP2StreamHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let state: TestHTTPServerState
    private var head: HTTPRequestHead?
    private var attempt = 0
    /// The request counts as in flight from its head until its response ends or the stream closes.
    private var isInFlight = false
    private var isOpen = true
    private var pendingStep: Scheduled<Void>?
    /// How long after a cut body's last byte the stream is reset (`close_after`).
    static let resetDelay = TimeAmount.milliseconds(100)

    init(state: TestHTTPServerState) {
        self.state = state
    }

    func channelInactive(context: ChannelHandlerContext) {
        isOpen = false
        pendingStep?.cancel()
        pendingStep = nil
        endFlight()
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let requestHead):
            guard head == nil else { return }
            head = requestHead
            attempt = state.requestArrived(
                requestHead.uri, headers: requestHead.headers.map { ($0.name, $0.value) }, isHTTP2: true)
            isInFlight = true
        case .body:
            break
        case .end:
            answer(context: context)
        }
    }

    private func endFlight() {
        guard isInFlight else { return }
        isInFlight = false
        state.requestFinished()
    }

    private func answer(context: ChannelHandlerContext) {
        guard let head else { return }
        let target = TestHTTPServer.Target(head.uri)
        let (routed, behaviour) =
            (try? (TestHTTPServer.Route(target).response(
                attempt: attempt, conditional: TestHTTPServer.Conditional(headers: head.headers.map { ($0.name, $0.value) }),
                apiKey: head.headers.first(name: "X-Api-Key")), TestHTTPServer.Behaviour(target)))
            ?? (.page(status: 400), TestHTTPServer.Behaviour())
        let response = state.response(for: target, routed: routed)
        let hasBody = head.method != .HEAD && !response.forbidsBody
        guard let gate = behaviour.gate else {
            delay(context: context, response, behaviour, hasBody: hasBody)
            return
        }
        let eventLoop = context.eventLoop
        let handler = NIOLoopBound(self, eventLoop: eventLoop)
        let boundContext = context.loopBound
        state.whenGateOpens(gate) {
            eventLoop.execute {
                handler.value.delay(context: boundContext.value, response, behaviour, hasBody: hasBody)
            }
        }
    }

    private func delay(
        context: ChannelHandlerContext, _ response: TestHTTPServer.Response, _ behaviour: TestHTTPServer.Behaviour,
        hasBody: Bool
    ) {
        guard isOpen else { return }
        guard behaviour.delayMilliseconds > 0 else {
            send(context: context, response, behaviour, hasBody: hasBody)
            return
        }
        pendingStep = context.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(Int64(behaviour.delayMilliseconds))) {
            self.send(context: context, response, behaviour, hasBody: hasBody)
        }
    }

    private func send(
        context: ChannelHandlerContext, _ response: TestHTTPServer.Response, _ behaviour: TestHTTPServer.Behaviour,
        hasBody: Bool
    ) {
        guard isOpen else { return }
        if behaviour.hangUp != nil {
            // A stream has no linger: closing it resets the stream, before any response.
            context.close(promise: nil)
            return
        }
        var headers = HTTPHeaders(response.headers.map { ($0.name, $0.value) })
        if hasBody, case .contentLength(let delta) = behaviour.framing {
            headers.add(name: "content-length", value: "\(max(0, response.body.count + delta))")
        }
        let status = HTTPResponseStatus(statusCode: response.status)
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http2, status: status, headers: headers))), promise: nil)
        var sendCount = hasBody ? response.body.count : 0
        switch behaviour.cut {
        case .stall(let after), .close(let after): sendCount = min(sendCount, after)
        case nil: break
        }
        if let bytesPerSecond = behaviour.slowBytesPerSecond, sendCount > 0 {
            context.flush()
            sendSlowly(context: context, response.body[..<sendCount], cut: behaviour.cut, bytesPerSecond: bytesPerSecond)
        } else {
            finish(context: context, response.body[..<sendCount], cut: behaviour.cut)
        }
    }

    private func sendSlowly(
        context: ChannelHandlerContext, _ body: ArraySlice<UInt8>, cut: TestHTTPServer.Behaviour.Cut?, bytesPerSecond: Int
    ) {
        guard isOpen else { return }
        let pieceSize = max(1, bytesPerSecond / 20)
        let piece = body.prefix(pieceSize)
        let rest = body.dropFirst(piece.count)
        guard !rest.isEmpty else {
            finish(context: context, piece, cut: cut)
            return
        }
        context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: piece)))), promise: nil)
        let interval = TimeAmount.nanoseconds(Int64(piece.count) * 1_000_000_000 / Int64(bytesPerSecond))
        pendingStep = context.eventLoop.assumeIsolated().scheduleTask(in: interval) {
            self.sendSlowly(context: context, rest, cut: cut, bytesPerSecond: bytesPerSecond)
        }
    }

    private func finish(context: ChannelHandlerContext, _ last: ArraySlice<UInt8>, cut: TestHTTPServer.Behaviour.Cut?) {
        if !last.isEmpty {
            context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: last)))), promise: nil)
        }
        switch cut {
        case .stall:
            context.flush()
        case .close:
            // Closing a stream channel resets the stream: the client sees it end early. The
            // reset goes out a moment after the head and the body's bytes, not in the same
            // write: libcurl 7.88 handles a reset read in one batch with the HEADERS frame before
            // it records the status, so the cut would look like a break before any response
            // (`network`) instead of a body cut after N bytes (`truncated`), as it does when the
            // reset arrives on its own, as a real origin's cut usually does.
            let written = context.eventLoop.makePromise(of: Void.self)
            context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(capacity: 0)))), promise: written)
            written.futureResult.assumeIsolated().whenComplete { _ in
                self.pendingStep = context.eventLoop.assumeIsolated().scheduleTask(in: Self.resetDelay) {
                    if self.isOpen { context.close(promise: nil) }
                }
            }
        case nil:
            // Out of flight before the end goes out, as in the HTTP/1 handler: once it is
            // written the client may start its next stream, and counted after the write, a peak
            // could see both at once, one more than the client ever had.
            endFlight()
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        }
    }
}
