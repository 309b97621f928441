import ImgdCore
import ImgdProtocol
import Logging
import NIOCore
import NIOHTTP1

/// Serves one HTTP connection on its event loop: reads each request head, answers it in order
/// (NIO's pipelining handler holds the next request until this one's response has ended),
/// keeps the connection alive when the client asks, and closes it on a protocol error.
///
/// A memory-tier hit is answered on the loop; anything that may wait (the index, a download,
/// `/metrics`) runs in a task whose result comes back to the loop. One request is in progress
/// at a time, so a connection holds at most one open cache file and one body in memory.
final class HTTPFaceConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private enum State {
        /// Waiting for a request head.
        case waiting
        /// A request is being answered; its task, when one runs.
        case answering(Task<Void, Never>?)
        /// A pipelined head waits for the client to take what was queued for it.
        case waitingForReader(HTTPRequestHead)
        /// The response asked for no keep-alive: the connection closes once it is written.
        case closing
        case closed
    }

    private let settings: HTTPFaceSettings
    private let peer: ControlPeer
    private let deadlines: HTTPFaceDeadlines
    private var state = State.waiting
    private var keepAlive = true
    private var context: ChannelHandlerContext?

    init(settings: HTTPFaceSettings, peer: ControlPeer, deadlines: HTTPFaceDeadlines) {
        self.settings = settings
        self.peer = peer
        self.deadlines = deadlines
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        // The context holds this handler: keeping it past removal would keep both forever.
        self.context = nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        if case .answering(let task) = state { task?.cancel() }
        state = .closed
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            deadlines.headReceived()
            guard case .waiting = state else { return }
            keepAlive = head.isKeepAlive
            settings.metrics.increment(.requests)
            // NIO's pipelining handler lets the next pipelined request in as soon as a
            // response's end is queued: one that has not left for the client waits here, so a
            // client that sends many requests and reads nothing holds one response, not many.
            guard context.channel.isWritable else {
                state = .waitingForReader(head)
                return
            }
            answer(head, context: context)
        case .body, .end:
            break
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable, case .waitingForReader(let head) = state {
            state = .waiting
            answer(head, context: context)
        }
        context.fireChannelWritabilityChanged()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard let parserError = error as? HTTPParserError else {
            context.close(promise: nil)
            return
        }
        // NIO's decoder closes the connection after this returns: the answer is written now, if
        // no response has started (its own bytes are on the wire otherwise).
        guard case .waiting = state else {
            context.close(promise: nil)
            return
        }
        settings.metrics.increment(.malformed)
        keepAlive = false
        let refusal: HTTPFaceError = switch parserError {
        case .headerOverflow: .headersTooLarge(limit: settings.limits.maxHeaderBytes)
        default: .badRequest("the request is not valid HTTP/1.1 (\(parserError))")
        }
        write(.error(refusal), isHead: false, context: context)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case ChannelEvent.inputClosed? = event as? ChannelEvent, case .waiting = state {
            // The client will send nothing more, and nothing is owed it.
            context.close(promise: nil)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    // MARK: Answering

    private func answer(_ head: HTTPRequestHead, context: ChannelHandlerContext) {
        let isHead = head.method == .HEAD
        if let refusal = refusal(of: head) {
            keepAlive = keepAlive && refusal.status != .payloadTooLarge
            write(.error(refusal), isHead: isHead, context: context)
            return
        }
        let route: HTTPFaceRoute
        switch HTTPFaceRoute.of(head) {
        case .success(let found): route = found
        case .failure(let error):
            write(.error(error), isHead: isHead, context: context)
            return
        }
        switch route {
        case .image(let query):
            answerImage(query, head: head, context: context)
        case .metrics, .healthz, .readyz:
            let backend = settings.backend
            guard backend.isAttached else {
                write(.error(HTTPFaceError(.shuttingDown)), isHead: head.method == .HEAD, context: context)
                return
            }
            run(head: head, context: context) { await backend.answer(route) }
        }
    }

    /// Why `head` is refused before its route is looked at: a body (none is read), or a
    /// request a browser makes on a web page's behalf.
    private func refusal(of head: HTTPRequestHead) -> HTTPFaceError? {
        let length = head.headers.first(name: "Content-Length").flatMap { Int($0.trimmingSpaces) }
        if head.headers.contains(name: "Transfer-Encoding") || (length ?? 0) != 0 || head.headers["Content-Length"].count > 1 {
            return .bodyNotAllowed
        }
        return HTTPFaceBrowserRule.refusal(of: head, overTCP: settings.isTCP)
    }

    private func answerImage(_ query: ImageQuery, head: HTTPRequestHead, context: ChannelHandlerContext) {
        if settings.isTCP, query.key != nil {
            let error = HTTPFaceError.badRequest("a chosen key needs a uid to belong to: ask on the HTTP face's Unix socket, not over TCP")
            write(.error(error), isHead: head.method == .HEAD, context: context)
            return
        }
        guard let commands = settings.backend.commands(for: query, peer: peer) else {
            write(.error(HTTPFaceError(.shuttingDown)), isHead: head.method == .HEAD, context: context)
            return
        }
        let started = NIODeadline.now()
        do {
            if let image = try commands.memoryImage() {
                let response = HTTPFaceResponder.response(for: image, head: head, now: WallClock.nowMilliseconds())
                settings.backend.recordGet(source: .memory, since: started)
                write(response, isHead: head.method == .HEAD, context: context)
                return
            }
        } catch {
            settings.backend.recordGet(source: nil, since: started)
            write(.error(HTTPFaceError(error)), isHead: head.method == .HEAD, context: context)
            return
        }
        let backend = settings.backend
        run(head: head, context: context) {
            do throws(ControlError) {
                let image = try await commands.openedImage(fetch: query.fetch)
                backend.recordGet(source: image.source, since: started)
                if Task.isCancelled {
                    HTTPFaceResponder.release(image)
                    return .error(HTTPFaceError(.shuttingDown))
                }
                return HTTPFaceResponder.response(for: image, head: head, now: WallClock.nowMilliseconds())
            } catch {
                backend.recordGet(source: nil, since: started)
                return .error(HTTPFaceError(error))
            }
        }
    }

    /// Runs `work` in a task and writes its response back on the loop (or drops it, closing a
    /// file it holds, when the connection closed meanwhile).
    private func run(
        head: HTTPRequestHead, context: ChannelHandlerContext, _ work: @escaping @Sendable () async -> HTTPFaceResponse
    ) {
        let loop = context.eventLoop
        let bound = NIOLoopBound(self, eventLoop: loop)
        let isHead = head.method == .HEAD
        let task = Task {
            let response = SendableResponse(await work())
            loop.execute {
                bound.value.finish(response.value, isHead: isHead)
            }
        }
        state = .answering(task)
    }

    private func finish(_ response: HTTPFaceResponse, isHead: Bool) {
        guard case .answering = state, let context else {
            if case .file(let handle, _) = response.body { try? handle.close() }
            return
        }
        write(response, isHead: isHead, context: context)
    }

    // MARK: Writing

    private func write(_ response: HTTPFaceResponse, isHead: Bool, context: ChannelHandlerContext) {
        var head = HTTPResponseHead(version: .http1_1, status: response.status, headers: response.headers)
        if !keepAlive {
            head.headers.replaceOrAdd(name: "Connection", value: "close")
        }
        settings.metrics.count(status: response.status)
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        var handle: NIOFileHandle?
        switch response.body {
        case .none:
            break
        case .bytes(let buffer):
            if !isHead { context.write(wrapOutboundOut(.body(.byteBuffer(buffer))), promise: nil) }
        case .file(let file, let range):
            handle = file
            let region = FileRegion(fileHandle: file, readerIndex: range.lowerBound, endIndex: range.upperBound)
            context.write(wrapOutboundOut(.body(.fileRegion(region))), promise: nil)
        }
        // Waiting again before the end is written: the pipelining handler hands over the next
        // pipelined request while the end is being written.
        let closesAfter = !keepAlive
        state = closesAfter ? .closing : .waiting
        deadlines.responseEnded()
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        context.writeAndFlush(wrapOutboundOut(.end(nil))).assumeIsolated().whenComplete { result in
            try? handle?.close()
            if closesAfter || (try? result.get()) == nil { bound.value.close() }
        }
    }

    private func close() {
        state = .closed
        context?.close(promise: nil)
    }
}

/// A response handed from a task back to its connection's loop, where it is used alone.
private struct SendableResponse: @unchecked Sendable {
    let value: HTTPFaceResponse
    init(_ value: HTTPFaceResponse) { self.value = value }
}
