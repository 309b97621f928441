import ImgdProtocol
import Logging
import NIOCore

/// One control connection, after the line decoder: turns lines into requests, runs them one at
/// a time in order through the command handler, writes each reply as one line, and enforces the
/// connection's limits (pending requests, queued output, idleness). Its life is ``State``
/// (`+State.swift`); writing is in `+Output.swift`, its numbers in ``ControlOutputAccount``;
/// events from a subscription are in `+Events.swift`.
///
/// Queued output is bounded by backpressure: once replies and events not yet taken by the
/// kernel reach half of ``ControlLimits/maxQueuedOutputBytes``, no request starts and nothing
/// more is read (the `read` event is held back) until the client has taken some. A request
/// starts only below that mark, so its reply, whatever its size, takes the queue at most one
/// reply past the limit. Replies decided when their line was read (`too_many_requests`, …) go
/// out as soon as the requests before them are answered, backed up or not; lines read past the
/// mark are parsed only below it, so their replies add no more than a request's would. A client that takes
/// nothing written to it for ``ControlLimits/slowReaderTimeout`` while over the mark is
/// disconnected; replies held behind a request still running are not the client's to take.
///
/// Everything here runs on the channel's event loop, which owns all of this state; the command
/// handler runs in a task whose result comes back to the loop through a promise.
///
/// Replies are batched: those written while the loop handles one read (a client that pipelines
/// sends many lines in one) or one completed command (and the waiting requests answered after
/// it) are collected and go to the kernel in one write, so a pipelining client costs one system
/// call per batch rather than one per reply. Events go out at once, after any collected replies.
final class ControlConnectionHandler: ChannelDuplexHandler {
    typealias InboundIn = ControlFrame
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// Something to answer, in request order.
    enum Pending {
        case request(ControlRequest)
        /// A reply decided when its line was read (`bad_request`, `too_many_requests`, …);
        /// with `closeAfter` the connection closes once it is flushed (`line_too_long`).
        case reply(ByteBuffer, closeAfter: Bool)
        /// A line read while the output was backed up, not parsed yet: it waits, as a request
        /// does, until the client has taken some output. Parsed at once, the lines of that read
        /// (up to a few hundred KiB of tiny lines) would each queue a reply of ~100 bytes, many
        /// times the output limit. Their bytes are bounded by the one read: reads are held.
        case line(ByteBuffer)
    }

    let settings: ControlConnectionSettings
    let peer: ControlPeer
    /// The daemon's logger with this connection's `peer=` on every line.
    let logger: Logger
    var limits: ControlLimits { settings.limits }

    var context: ChannelHandlerContext?
    /// Where the connection is in its life (`ControlConnectionHandler+State.swift`).
    var state = State.open
    var pending = CircularBuffer<Pending>()
    /// Requests waiting or running, for ``ControlLimits/maxPendingRequests``.
    var waitingRequests = 0
    /// Lines in `pending` not parsed yet: later lines wait behind them, in order.
    var unparsedLines = 0
    /// The command handler's task for the running request; nil when none runs.
    var running: Task<Void, Never>?
    /// The descriptor being passed with the reply just written (`+Descriptor.swift`): a barrier,
    /// as a running request is, since nothing may be written until its `\n` has gone with it.
    var passing: DescriptorPass?
    var isRunning: Bool { running != nil || passing != nil || streaming }
    /// The line decoder's switch to raw bytes (`+Stream.swift`).
    let streamSwitch: ControlStreamSwitch
    /// A stream command has taken the connection over (`+Stream.swift`): a barrier for good.
    var streaming = false
    /// The queued output, held replies and events, the backpressure mark and the slow-reader
    /// clock (``ControlOutputAccount``); the replies of the batch in `outbox` are counted there.
    var output: ControlOutputAccount
    /// Replies collected while `collectingOutput`, sent as one write when the batch ends.
    var outbox: ByteBuffer?
    /// A batch of replies is open (one read or one completed command is being handled). Beside
    /// `state`, not in it: a batch opens and ends within one turn of the loop, in any state.
    var collectingOutput = false
    /// When the connection last became quiet (or was accepted): the idle timeout runs from here.
    /// One timer at a time; when it fires early (the connection was busy meanwhile) it re-arms
    /// itself for the rest, so a request costs no timer of its own.
    var quietSince = NIODeadline.now()
    var idleTimer: Scheduled<Void>?
    var lingerTimer: Scheduled<Void>?
    /// Looks at the slow-reader clock (``ControlOutputAccount/stallDeadline``). One timer at a
    /// time, re-armed for the rest when it fires early.
    var stallTimer: Scheduled<Void>?

    /// The event subscription's token with the hub.
    var subscription: Int?
    /// Events dropped since the last `events_dropped` line, and the last one's number.
    var droppedEvents = 0
    var lastDroppedSequence = 0

    init(settings: ControlConnectionSettings, peer: ControlPeer, streamSwitch: ControlStreamSwitch = ControlStreamSwitch()) {
        self.settings = settings
        self.peer = peer
        self.streamSwitch = streamSwitch
        logger = settings.logger.forPeer(peer)
        output = ControlOutputAccount(limits: settings.limits, now: .now())
    }

    // MARK: Channel events

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        if context.channel.isActive { armIdleTimer() }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        tearDown()
        self.context = nil
    }

    func channelActive(context: ChannelHandlerContext) {
        armIdleTimer()
        context.fireChannelActive()
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        // The lines of this read have been handled: what they answered at once goes out now.
        endOutputBatch()
        context.fireChannelReadComplete()
    }

    func channelInactive(context: ChannelHandlerContext) {
        tearDown()
        context.fireChannelInactive()
    }

    /// The pipeline asks for more input: held back while the output is backed up, so a client
    /// that sends without reading fills its own socket buffer, not the daemon's memory.
    func read(context: ChannelHandlerContext) {
        if output.isBackedUp, state != .closed {
            output.holdRead()
        } else {
            context.read()
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { sendDropNoticeIfReady() }
        context.fireChannelWritabilityChanged()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is ControlShutdownEvent {
            beginDraining()
        } else if streaming {
            // The stream's handler hears of the client's half-close (an import's end).
            context.fireUserInboundEventTriggered(event)
        } else if let event = event as? ChannelEvent, event == .inputClosed {
            // The client will send nothing more: answer what it sent, then close.
            state.endInput()
            endOutputBatch()
            if !isRunning && pending.isEmpty { closeAfterFlush() }
        } else {
            context.fireUserInboundEventTriggered(event)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // A reset by the peer or a failed write: nothing to tell anyone.
        close()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard state.readsLines else { return }
        collectingOutput = true
        switch unwrapInboundIn(data) {
        case .tooLong:
            state.endInput()
            settings.metrics.increment(\.linesTooLong)
            logger.info("control: a line over \(limits.maxLineBytes) bytes; replying line_too_long and closing the connection")
            hold(ControlLine.error(.lineTooLong(limit: limits.maxLineBytes)), closeAfter: true)
        case .raw(let bytes):
            // A stream command's bytes: for its handler, next in the pipeline (none yet: dropped).
            if streaming { context.fireChannelRead(NIOAny(bytes)) }
            return
        case .line(let line) where output.isBackedUp || unparsedLines > 0:
            unparsedLines += 1
            pending.append(.line(line))
        case .line(let line):
            switch pendingItem(for: line) {
            case .request(let request) where ControlStream.commands.contains(request.command):
                acceptStream(request)
            case .request(let request):
                pending.append(.request(request))
            case .reply(let reply, let closeAfter):
                hold(reply, closeAfter: closeAfter)
            case .line:
                preconditionFailure("a parsed line is a request or a reply")
            }
        }
        drain()
    }

    // MARK: Requests

    /// What a line asks for: a request to run, or the reply it gets without running.
    private func pendingItem(for line: ByteBuffer) -> Pending {
        let value: JSONValue
        do {
            value = try JSONValue(parsing: line)
        } catch {
            return .reply(ControlLine.error(.badRequest(error.description)), closeAfter: false)
        }
        guard case .object(var members) = value else {
            return .reply(ControlLine.error(.badRequest("a request must be a JSON object, not \(value.kindDescription)")), closeAfter: false)
        }
        let id = members.removeValue(forKey: "id") ?? .null
        guard let command = members.removeValue(forKey: "cmd") else {
            return .reply(ControlLine.error(.badRequest("\"cmd\" is missing"), id: id), closeAfter: false)
        }
        guard case .string(let name) = command else {
            return .reply(ControlLine.error(.badRequest("\"cmd\" must be a string, not \(command.kindDescription)"), id: id), closeAfter: false)
        }
        guard state.takesRequests else {
            return .reply(ControlLine.error(.shuttingDown, id: id), closeAfter: false)
        }
        guard waitingRequests < limits.maxPendingRequests else {
            return .reply(ControlLine.error(.tooManyRequests(limit: limits.maxPendingRequests), id: id), closeAfter: false)
        }
        waitingRequests += 1
        return .request(ControlRequest(id: id, command: name, arguments: members, peer: peer))
    }

    /// Queues a reply behind the requests before it; it counts as queued output from now on.
    func hold(_ reply: ByteBuffer, closeAfter: Bool) {
        guard output.fits(reply.readableBytes) else {
            disconnectSlowReader()
            return
        }
        grew(output.hold(reply.readableBytes, now: .now()))
        pending.append(.reply(reply, closeAfter: closeAfter))
    }

    /// Answers what can be answered now, in order, until a request has to wait for the handler
    /// or for the client to take its output (see ``ControlOutputAccount/mayStart``). A reply
    /// already decided goes out even while backed up: it counts as queued output whether held or
    /// written, so writing it does not add to the total, and holding it back would keep a client
    /// that reads from ever seeing the output fall (it would be dropped as a slow reader). Only
    /// starting a request waits on backpressure, since its reply is new output.
    func drain() {
        loop: while state != .closed, !isRunning, let next = pending.first {
            let item: Pending
            switch next {
            case .reply(let reply, _):
                output.release(reply.readableBytes)
                item = next
            case .line(let line):
                guard output.mayStart else { break loop }
                unparsedLines -= 1
                item = pendingItem(for: line)
            case .request:
                guard output.mayStart else { break loop }
                item = next
            }
            pending.removeFirst()
            switch item {
            case .line:
                preconditionFailure("a parsed line is a request or a reply")
            case .reply(let reply, let closeAfter):
                write(reply, isEvent: false)
                if closeAfter {
                    closeAfterFlush()
                    return
                }
            case .request(let request) where !state.takesRequests:
                waitingRequests -= 1
                write(ControlLine.error(.shuttingDown, id: request.id), isEvent: false)
            case .request(let request) where request.command == "subscribe":
                waitingRequests -= 1
                write(ControlLine.reply(id: request.id, subscribe(request)), isEvent: false)
            case .request(let request):
                run(request)
            }
        }
        if state != .closed, !isRunning, pending.isEmpty { becameQuiet() }
    }

    /// Runs `request` through the command handler; its reply is written back on the loop.
    private func run(_ request: ControlRequest) {
        guard let context else { return }
        if ControlStream.commands.contains(request.command) {
            startStream(request, context: context)
            return
        }
        let handler = settings.handler
        if request.wantsDescriptor {
            runPassingDescriptor(request, context: context)
            return
        }
        // A get's latency, from here to its reply handed to the channel (one clock read each end).
        let started = request.command == "get" ? NIODeadline.now() : nil
        if let reply = handler.replyAtOnce(request) {
            waitingRequests -= 1
            write(reply, isEvent: false)
            if let started { recordGet(request, since: started) }
            return
        }
        let promise = context.eventLoop.makePromise(of: ByteBuffer.self)
        let id = request.id
        // Encoded in the task, off the event loop: a large reply (an image's base64, up to
        // max-data-bytes) would otherwise hold up every other connection on the loop.
        running = promise.completeWithTask { ControlLine.reply(id: id, await handler.handle(request)) }
        promise.futureResult.assumeIsolated().whenComplete { [self] outcome in
            running = nil
            waitingRequests -= 1
            if let started { recordGet(request, since: started) }
            guard state != .closed else { return }
            let line: ByteBuffer
            switch outcome {
            case .success(let encoded): line = encoded
            case .failure(let error): line = ControlLine.reply(id: id, .failure(.other(code: "internal", message: "the command failed: \(error)")))
            }
            // This reply and those of the pipelined requests answered at once after it: one write.
            collectingOutput = true
            write(line, isEvent: false)
            drain()
            endOutputBatch()
        }
    }

    /// Counts a `get` answered now in the latency histogram, by the source its handler noted.
    private func recordGet(_ request: ControlRequest, since started: NIODeadline) {
        guard let source = request.prepared.answerSource else { return }
        let elapsed = NIODeadline.now().uptimeNanoseconds &- started.uptimeNanoseconds
        settings.histograms.recordGet(face: .control, source: source, nanoseconds: elapsed)
    }

    /// Nothing is running or waiting: close if the client or the server is done, else wait
    /// for the next request, at most the idle timeout.
    private func becameQuiet() {
        if state == .open {
            quietSince = .now()
            armIdleTimer()
        } else {
            closeAfterFlush()
        }
    }

    /// The server is stopping: events stop at once; an open connection drains (a closing one
    /// goes on closing).
    private func beginDraining() {
        guard state != .closed else { return }
        endSubscription()
        guard state.beginDraining() else { return }
        idleTimer?.cancel()
        idleTimer = nil
        drain()
    }

    // MARK: Closing

    /// Closes once everything written has been flushed, or after the grace period at most.
    func closeAfterFlush() {
        guard state != .closed, state != .closing, let context else { return }
        // What was collected goes first; its write may complete at once, while the connection
        // is not closing yet (and may close it, or start closing, meanwhile).
        sendOutbox()
        guard state.beginClosing() else { return }
        idleTimer?.cancel()
        idleTimer = nil
        if output.writtenBytes == 0 {
            close()
            return
        }
        lingerTimer = context.eventLoop.assumeIsolated().scheduleTask(in: TimeAmount(limits.shutdownGracePeriod)) { [self] in
            close()
        }
    }

    func close() {
        guard state.close() else { return }
        context?.close(promise: nil)
    }

    /// The connection is gone: stop the running command and let go of the subscription.
    private func tearDown() {
        _ = state.close()
        running?.cancel()
        running = nil
        // Closes the daemon's copy of a descriptor not sent yet.
        passing?.retryTimer?.cancel()
        passing = nil
        idleTimer?.cancel()
        idleTimer = nil
        lingerTimer?.cancel()
        lingerTimer = nil
        stallTimer?.cancel()
        stallTimer = nil
        endSubscription()
        pending.removeAll()
        output.dropHeld()
        unparsedLines = 0
        outbox = nil
    }

    // MARK: Idleness

    /// Makes sure a timer will look at the connection when it has been quiet for the idle
    /// timeout. A timer already scheduled is kept: it checks again when it fires.
    private func armIdleTimer() {
        guard state == .open, subscription == nil, idleTimer == nil, let context else { return }
        idleTimer = context.eventLoop.assumeIsolated().scheduleTask(deadline: quietSince + TimeAmount(limits.idleTimeout)) { [self] in
            idleTimer = nil
            // Busy now: becoming quiet again arms a new timer.
            guard state == .open, !isRunning, pending.isEmpty, subscription == nil else { return }
            if NIODeadline.now() < quietSince + TimeAmount(limits.idleTimeout) {
                armIdleTimer()
            } else {
                close()
            }
        }
    }
}
