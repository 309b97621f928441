import NIOCore
import NIOHTTP1

#if canImport(Glibc)
import Glibc
#endif

/// Serves one connection of a ``TestHTTPServer``: records each request as its head arrives, then
/// answers requests in order, one at a time, stepping through the script its target asks for
/// (gate, delay, head, body at once or in timed pieces, then end, stall or close).
///
/// Everything here runs on the connection's event loop; waits are scheduled tasks on that loop,
/// never sleeps, so one stalled or slow response does not hold up the others.
final class TestHTTPHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = ByteBuffer

    /// More requests than this waiting on one connection (a client pipelining into a held
    /// response) closes it.
    static let maximumQueuedRequests = 64
    /// The target pause between pieces of a `slow_bps` body.
    static let slowPieceInterval: Int64 = 50_000_000
    /// Chunk size for `chunked=1` bodies sent at once: several chunks, so clients really parse framing.
    static let chunkSize = 4096

    /// A request whose head has arrived: it counts as in flight until it is removed from `requests`.
    private struct Request {
        let id: Int
        let head: HTTPRequestHead
        let attempt: Int
        var isComplete = false
    }

    /// One response being delivered, fixed when its request is taken up.
    private struct Delivery {
        let requestID: Int
        let response: TestHTTPServer.Response
        let behaviour: TestHTTPServer.Behaviour
        let keepAlive: Bool
        /// False for HEAD and bodiless statuses: then not even a chunked terminator is sent.
        let hasBody: Bool
        /// How many body bytes go on the wire: none without a body, fewer for a cut.
        let sendCount: Int

        var isChunked: Bool { behaviour.framing == .chunked }
    }

    private let state: TestHTTPServerState
    /// Requests in arrival order; the first is the one being answered, once `answering` is set.
    private var requests: [Request] = []
    private var answering: Int?
    private var nextID = 0
    private var isOpen = true
    /// The delay or next slow piece, cancelled when the connection closes.
    private var pendingStep: Scheduled<Void>?

    /// False over TLS, where ``TestConnectionTracker`` counts the connection.
    private let tracksConnection: Bool

    init(state: TestHTTPServerState, tracksConnection: Bool = true) {
        self.state = state
        self.tracksConnection = tracksConnection
    }

    func channelActive(context: ChannelHandlerContext) {
        if tracksConnection, !state.connectionOpened(context.channel) {
            context.close(promise: nil)
        }
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        isOpen = false
        pendingStep?.cancel()
        pendingStep = nil
        // Every request still here ends with the connection: held, stalled, or never taken up.
        for _ in requests { state.requestFinished() }
        requests.removeAll()
        answering = nil
        if tracksConnection { state.connectionClosed(context.channel) }
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // A request NIO cannot parse: drop the connection, the client sees the close.
        context.close(promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            guard requests.count < Self.maximumQueuedRequests else {
                context.close(promise: nil)
                return
            }
            let attempt = state.requestArrived(head.uri, headers: head.headers.map { ($0.name, $0.value) })
            requests.append(Request(id: nextID, head: head, attempt: attempt))
            nextID += 1
        case .body:
            break  // request bodies are ignored: every route answers from its target alone
        case .end:
            guard !requests.isEmpty else { return }
            requests[requests.count - 1].isComplete = true
            answerNext(context: context)
        }
    }

    // MARK: Delivery steps

    /// Takes up the oldest request if none is being answered and it has fully arrived.
    private func answerNext(context: ChannelHandlerContext) {
        guard isOpen, answering == nil, let request = requests.first, request.isComplete else { return }
        answering = request.id
        let target = TestHTTPServer.Target(request.head.uri)
        // A target the server cannot use is answered 400 at once, without its modifiers.
        let (routed, behaviour) =
            (try? (TestHTTPServer.Route(target).response(
                attempt: request.attempt,
                conditional: TestHTTPServer.Conditional(headers: request.head.headers.map { ($0.name, $0.value) }),
                apiKey: request.head.headers.first(name: "X-Api-Key")), TestHTTPServer.Behaviour(target)))
            ?? (.page(status: 400), TestHTTPServer.Behaviour())
        let response = state.response(for: target, routed: routed)
        let hasBody = request.head.method != .HEAD && !response.forbidsBody
        var sendCount = hasBody ? response.body.count : 0
        switch behaviour.cut {
        case .stall(let after), .close(let after): sendCount = min(sendCount, after)
        case nil: break
        }
        let delivery = Delivery(
            requestID: request.id, response: response, behaviour: behaviour,
            keepAlive: request.head.isKeepAlive && !behaviour.closesAfterBody, hasBody: hasBody,
            sendCount: sendCount)

        guard let gate = behaviour.gate else {
            delay(context: context, delivery)
            return
        }
        // The gate opens on the test's thread: hop back to this loop, where handler and context live.
        let eventLoop = context.eventLoop
        let handler = NIOLoopBound(self, eventLoop: eventLoop)
        let boundContext = context.loopBound
        state.whenGateOpens(gate) {
            eventLoop.execute { handler.value.delay(context: boundContext.value, delivery) }
        }
    }

    private func isCurrent(_ delivery: Delivery) -> Bool {
        isOpen && answering == delivery.requestID
    }

    private func delay(context: ChannelHandlerContext, _ delivery: Delivery) {
        guard isCurrent(delivery) else { return }
        let milliseconds = delivery.behaviour.delayMilliseconds
        guard milliseconds > 0 else {
            sendHead(context: context, delivery)
            return
        }
        pendingStep = context.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(Int64(milliseconds))) {
            self.sendHead(context: context, delivery)
        }
    }

    private func sendHead(context: ChannelHandlerContext, _ delivery: Delivery) {
        guard isCurrent(delivery) else { return }
        switch delivery.behaviour.hangUp {
        case .close:
            context.close(promise: nil)
            return
        case .reset:
            // A zero linger turns the close into a reset: the client's read fails with ECONNRESET.
            guard let socket = context.channel as? any SocketOptionProvider else {
                context.close(promise: nil)
                return
            }
            socket.setSoLinger(linger(l_onoff: 1, l_linger: 0)).assumeIsolated().whenComplete { _ in context.close(promise: nil) }
            return
        case nil:
            break
        }
        let head = delivery.response.head(framing: delivery.behaviour.framing, keepAlive: delivery.keepAlive)
        var buffer = context.channel.allocator.buffer(capacity: head.utf8.count + delivery.sendCount + 64)
        buffer.writeString(head)
        if let bytesPerSecond = delivery.behaviour.slowBytesPerSecond, delivery.sendCount > 0 {
            context.writeAndFlush(wrapOutboundOut(buffer), promise: nil)
            sendSlowly(context: context, delivery, from: 0, bytesPerSecond: bytesPerSecond)
        } else {
            appendBody(delivery, 0..<delivery.sendCount, to: &buffer, pieceSize: Self.chunkSize)
            finish(context: context, delivery, lastBytes: buffer)
        }
    }

    /// Sends one piece, then schedules the next: pieces of about 1/20 s of traffic, so the rate
    /// holds for slow and fast settings alike.
    private func sendSlowly(
        context: ChannelHandlerContext, _ delivery: Delivery, from offset: Int, bytesPerSecond: Int
    ) {
        guard isCurrent(delivery) else { return }
        let pieceSize = max(1, bytesPerSecond / 20)
        let end = min(delivery.sendCount, offset + pieceSize)
        var buffer = context.channel.allocator.buffer(capacity: end - offset + 16)
        appendBody(delivery, offset..<end, to: &buffer, pieceSize: pieceSize)
        guard end < delivery.sendCount else {
            finish(context: context, delivery, lastBytes: buffer)
            return
        }
        context.writeAndFlush(wrapOutboundOut(buffer), promise: nil)
        let interval = TimeAmount.nanoseconds(Int64(end - offset) * 1_000_000_000 / Int64(bytesPerSecond))
        pendingStep = context.eventLoop.assumeIsolated().scheduleTask(in: interval) {
            self.sendSlowly(context: context, delivery, from: end, bytesPerSecond: bytesPerSecond)
        }
    }

    /// Appends body bytes `range`, framed as chunks of at most `pieceSize` when chunked.
    private func appendBody(
        _ delivery: Delivery, _ range: Range<Int>, to buffer: inout ByteBuffer, pieceSize: Int
    ) {
        guard delivery.isChunked else {
            buffer.writeBytes(delivery.response.body[range])
            return
        }
        var start = range.lowerBound
        while start < range.upperBound {
            let end = min(range.upperBound, start + pieceSize)
            buffer.writeString(String(end - start, radix: 16) + "\r\n")
            buffer.writeBytes(delivery.response.body[start..<end])
            buffer.writeString("\r\n")
            start = end
        }
    }

    /// Writes the last bytes of a delivery, then ends it as its behaviour says.
    private func finish(context: ChannelHandlerContext, _ delivery: Delivery, lastBytes: ByteBuffer) {
        var buffer = lastBytes
        switch delivery.behaviour.cut {
        case .stall:
            // Nothing more, ever: the request stays in flight until the client gives up and closes.
            context.writeAndFlush(wrapOutboundOut(buffer), promise: nil)
        case .close:
            let written = context.eventLoop.makePromise(of: Void.self)
            context.writeAndFlush(wrapOutboundOut(buffer), promise: written)
            // Close only once the bytes are out: closing earlier would drop the queued writes.
            written.futureResult.assumeIsolated().whenComplete { _ in context.close(promise: nil) }
        case nil:
            if delivery.isChunked && delivery.hasBody {
                buffer.writeString("0\r\n\r\n")
            }
            // The request leaves flight before its last bytes go out. Once they are written the
            // client may finish and send its next request, on another connection and loop, before
            // this write's completion runs here; counted after it, a gauge shared by several
            // servers would see both at once, one more than the client ever had.
            requests.removeFirst()
            state.requestFinished()
            let written = context.eventLoop.makePromise(of: Void.self)
            context.writeAndFlush(wrapOutboundOut(buffer), promise: written)
            written.futureResult.assumeIsolated().whenComplete { _ in
                self.responseEnded(context: context, delivery)
            }
        }
    }

    /// The response end is written (its request already left flight): the connection closes or
    /// takes up the next request.
    private func responseEnded(context: ChannelHandlerContext, _ delivery: Delivery) {
        guard isCurrent(delivery) else { return }
        answering = nil
        if delivery.keepAlive {
            answerNext(context: context)
        } else {
            context.close(promise: nil)
        }
    }
}
