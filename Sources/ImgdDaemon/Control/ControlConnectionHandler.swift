import ImgdProtocol
import Logging
import NIOCore

/// One control connection, after the line decoder: turns lines into requests, runs them one at
/// a time in order through the command handler, writes each reply as one line, and enforces the
/// connection's limits (pending requests, queued output, idleness). Events from a subscription
/// are in `ControlConnectionHandler+Events.swift`.
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

    enum State {
        /// Reading and answering requests.
        case open
        /// The server is stopping: waiting and new requests get `shutting_down`; the connection
        /// closes once the running request has been answered and the replies have been flushed.
        case draining
        /// Closed or closing: nothing more is read or written.
        case closed
    }

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
    var limits: ControlLimits { settings.limits }

    var context: ChannelHandlerContext?
    var state = State.open
    var pending = CircularBuffer<Pending>()
    /// Requests waiting or running, for ``ControlLimits/maxPendingRequests``.
    var waitingRequests = 0
    /// Bytes of the replies in `pending`; they count as queued output.
    var heldReplyBytes = 0
    /// Lines in `pending` not parsed yet: later lines wait behind them, in order.
    var unparsedLines = 0
    /// The command handler's task for the running request.
    var running: Task<Void, Never>?
    var isRunning = false
    /// After a line was too long: later lines are not read.
    var readsEnded = false
    /// Close as soon as the queued output is flushed.
    var closeWhenFlushed = false
    /// Written to the channel or collected in `outbox`, not yet taken by the kernel.
    var queuedOutputBytes = 0
    /// Replies collected while `collectingOutput`, sent as one write when the batch ends.
    var outbox: ByteBuffer?
    var collectingOutput = false
    /// The largest queued output and event counts this connection reported to the metrics; the
    /// shared metrics are only touched when a new high-water mark is reached.
    var reportedQueuedOutputBytes = 0
    var reportedQueuedEvents = 0
    /// When the connection last became quiet (or was accepted): the idle timeout runs from here.
    /// One timer at a time; when it fires early (the connection was busy meanwhile) it re-arms
    /// itself for the rest, so a request costs no timer of its own.
    var quietSince = NIODeadline.now()
    var idleTimer: Scheduled<Void>?
    var lingerTimer: Scheduled<Void>?
    /// A `read` held back while the output is backed up; passed on once it is not.
    var readHeldBack = false
    /// When the kernel last took queued output (or the output became backed up): the slow-reader
    /// timeout runs from here. One timer at a time, re-armed for the rest when it fires early.
    var lastOutputProgress = NIODeadline.now()
    var stallTimer: Scheduled<Void>?

    /// The event subscription's token with the hub.
    var subscription: Int?
    /// Events written and not yet taken by the kernel.
    var unsentEvents = 0
    /// Events dropped since the last `events_dropped` line, and the last one's number.
    var droppedEvents = 0
    var lastDroppedSequence = 0

    init(settings: ControlConnectionSettings, peer: ControlPeer) {
        self.settings = settings
        self.peer = peer
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
        if isBackedUp, state != .closed {
            readHeldBack = true
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
        } else if let event = event as? ChannelEvent, event == .inputClosed {
            // The client will send nothing more: answer what it sent, then close.
            readsEnded = true
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
        guard state != .closed, !readsEnded else { return }
        collectingOutput = true
        switch unwrapInboundIn(data) {
        case .tooLong:
            readsEnded = true
            settings.metrics.increment(\.linesTooLong)
            settings.logger.info(
                "control: \(peer) sent a line over \(limits.maxLineBytes) bytes; replying line_too_long and closing the connection",
                metadata: ["peer": "\(peer)"])
            hold(ControlLine.error(.lineTooLong(limit: limits.maxLineBytes)), closeAfter: true)
        case .line(let line) where isBackedUp || unparsedLines > 0:
            unparsedLines += 1
            pending.append(.line(line))
        case .line(let line):
            switch pendingItem(for: line) {
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
        guard state == .open else {
            return .reply(ControlLine.error(.shuttingDown, id: id), closeAfter: false)
        }
        guard waitingRequests < limits.maxPendingRequests else {
            return .reply(ControlLine.error(.tooManyRequests(limit: limits.maxPendingRequests), id: id), closeAfter: false)
        }
        waitingRequests += 1
        return .request(ControlRequest(id: id, command: name, arguments: members, peer: peer))
    }

    /// Queues a reply behind the requests before it; it counts as queued output from now on.
    private func hold(_ reply: ByteBuffer, closeAfter: Bool) {
        guard fitsOutputLimit(reply.readableBytes) else {
            disconnectSlowReader()
            return
        }
        let wasBackedUp = isBackedUp
        heldReplyBytes += reply.readableBytes
        if !wasBackedUp, isBackedUp { becameBackedUp() }
        recordQueuedOutput()
        pending.append(.reply(reply, closeAfter: closeAfter))
    }

    /// Answers what can be answered now, in order, until a request has to wait for the handler
    /// or for the client to take its output (see ``mayStart``). A reply already decided goes
    /// out even while backed up: it counts as queued output whether held or written, so writing
    /// it does not add to the total, and holding it back would keep a client that reads from
    /// ever seeing the output fall (it would be dropped as a slow reader). Only starting a
    /// request waits on backpressure, since its reply is new output.
    func drain() {
        loop: while state != .closed, !isRunning, let next = pending.first {
            let item: Pending
            switch next {
            case .reply(let reply, _):
                heldReplyBytes -= reply.readableBytes
                item = next
            case .line(let line):
                guard mayStart else { break loop }
                unparsedLines -= 1
                item = pendingItem(for: line)
            case .request:
                guard mayStart else { break loop }
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
            case .request(let request) where state == .draining:
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
        let handler = settings.handler
        if let reply = handler.replyAtOnce(request) {
            waitingRequests -= 1
            write(reply, isEvent: false)
            return
        }
        isRunning = true
        let promise = context.eventLoop.makePromise(of: ByteBuffer.self)
        let id = request.id
        // Encoded in the task, off the event loop: a large reply (an image's base64, up to
        // max-data-bytes) would otherwise hold up every other connection on the loop.
        running = promise.completeWithTask { ControlLine.reply(id: id, await handler.handle(request)) }
        promise.futureResult.assumeIsolated().whenComplete { [self] outcome in
            running = nil
            isRunning = false
            waitingRequests -= 1
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

    /// Nothing is running or waiting: close if the client or the server is done, else wait
    /// for the next request, at most the idle timeout.
    private func becameQuiet() {
        if state == .draining || readsEnded {
            closeAfterFlush()
        } else {
            quietSince = .now()
            armIdleTimer()
        }
    }

    private func beginDraining() {
        guard state == .open else { return }
        state = .draining
        endSubscription()
        idleTimer?.cancel()
        idleTimer = nil
        drain()
    }

    // MARK: Output

    /// Whether `size` more bytes may be queued: the queued output stays within the limit, or
    /// nothing else is queued (one line may be larger than the limit on its own).
    func fitsOutputLimit(_ size: Int) -> Bool {
        let queued = queuedOutputBytes + heldReplyBytes
        return queued == 0 || queued + size <= limits.maxQueuedOutputBytes
    }

    /// Half the output limit or more is queued (written or held): nothing more is read or parsed
    /// until the client takes some (see ``mayStart`` for requests). Half, not all: a reply of a request started just below the mark then
    /// still fits under the limit unless it is larger than half of it on its own.
    var isBackedUp: Bool {
        queuedOutputBytes + heldReplyBytes >= limits.maxQueuedOutputBytes / 2
    }

    /// Whether the next request (or unparsed line) may start: the output written and not taken
    /// by the kernel is below the mark. Replies held behind it do not count here: they can only
    /// go out after it, so waiting on them would wait forever. They are bounded on their own,
    /// as lines past the mark are not parsed (``isBackedUp``), so the queue still ends at most
    /// one reply past the limit.
    var mayStart: Bool {
        queuedOutputBytes < limits.maxQueuedOutputBytes / 2
    }

    /// Writes one line (a reply is collected while a batch is open). A reply is always queued:
    /// its request started below the backpressure mark, so the queue ends at most one reply past
    /// the limit. An event that would pass the limit disconnects the client (the subscription
    /// drops events long before, see ``deliverEvent(_:sequence:)``).
    func write(_ line: ByteBuffer, isEvent: Bool) {
        guard state != .closed, context != nil else { return }
        let size = line.readableBytes
        guard !isEvent || fitsOutputLimit(size) else {
            disconnectSlowReader()
            return
        }
        let wasBackedUp = isBackedUp
        queuedOutputBytes += size
        if !wasBackedUp, isBackedUp { becameBackedUp() }
        recordQueuedOutput()
        guard isEvent else {
            if collectingOutput {
                if outbox == nil { outbox = line } else { outbox!.writeImmutableBuffer(line) }
            } else {
                send(line, events: 0)
            }
            return
        }
        unsentEvents += 1
        if unsentEvents > reportedQueuedEvents {
            reportedQueuedEvents = unsentEvents
            settings.metrics.recordMaximum(\.largestQueuedEvents, unsentEvents)
        }
        // An event follows the replies written before it.
        sendOutbox()
        send(line, events: 1)
    }

    /// Reports a new high-water mark of queued output (written or held) to the metrics.
    private func recordQueuedOutput() {
        guard queuedOutputBytes + heldReplyBytes > reportedQueuedOutputBytes else { return }
        reportedQueuedOutputBytes = queuedOutputBytes + heldReplyBytes
        settings.metrics.recordMaximum(\.largestQueuedOutputBytes, reportedQueuedOutputBytes)
    }

    /// Closes the batch of collected replies and sends them.
    func endOutputBatch() {
        collectingOutput = false
        sendOutbox()
    }

    /// Sends the collected replies (already counted in `queuedOutputBytes`) as one write.
    private func sendOutbox() {
        guard let batch = outbox else { return }
        outbox = nil
        send(batch, events: 0)
    }

    /// Hands `bytes` (already counted in `queuedOutputBytes`) to the channel and flushes. A
    /// large batch goes in slices of ``sliceBytes`` (views of the same memory), each written
    /// with its own promise: the queued count then falls as the client reads, and a client
    /// reading a 5 MiB reply slowly but steadily is seen to make progress, not to stall.
    private func send(_ bytes: ByteBuffer, events: Int) {
        guard let context else { return }
        settings.metrics.countWrite()
        var rest = bytes
        while rest.readableBytes > 0 {
            let slice = rest.readSlice(length: min(Self.sliceBytes, rest.readableBytes))!
            let size = slice.readableBytes
            let isLast = rest.readableBytes == 0
            let promise = context.eventLoop.makePromise(of: Void.self)
            promise.futureResult.assumeIsolated().whenComplete { [self] _ in
                queuedOutputBytes -= size
                if isLast { unsentEvents -= events }
                lastOutputProgress = .now()
                written()
            }
            context.write(wrapOutboundOut(slice), promise: promise)
        }
        context.flush()
    }

    /// The most bytes handed to the channel in one write: NIO gathers consecutive ones into one
    /// `writev`, so slicing costs no system calls.
    static let sliceBytes = 256 * 1024

    /// A line reached the kernel (or failed to).
    private func written() {
        guard state != .closed else { return }
        if closeWhenFlushed {
            if queuedOutputBytes == 0 { close() }
            return
        }
        sendDropNoticeIfReady()
        // Below the mark again: read on.
        if !isBackedUp, readHeldBack, let context {
            readHeldBack = false
            context.read()
        }
        // Answer what waited: held replies go out even while backed up (see ``drain()``).
        if !isRunning, !pending.isEmpty {
            collectingOutput = true
            drain()
            endOutputBatch()
        }
    }

    /// The output just reached the backpressure mark: the slow-reader timeout starts now.
    func becameBackedUp() {
        lastOutputProgress = .now()
        armStallTimer()
    }

    /// Makes sure a timer looks at the connection once it has been backed up with no output
    /// taken for the slow-reader timeout. A timer already scheduled is kept.
    private func armStallTimer() {
        guard state != .closed, stallTimer == nil, let context else { return }
        let timeout = TimeAmount(limits.slowReaderTimeout)
        stallTimer = context.eventLoop.assumeIsolated().scheduleTask(deadline: lastOutputProgress + timeout) { [self] in
            stallTimer = nil
            guard state != .closed, isBackedUp else { return }
            if queuedOutputBytes == 0 {
                // The kernel took everything written: what is queued are replies held behind a
                // request still running, so the wait is the daemon's, not the client's. Look
                // again later, as if the client had just read.
                lastOutputProgress = .now()
                armStallTimer()
            } else if NIODeadline.now() < lastOutputProgress + timeout {
                armStallTimer()
            } else {
                disconnectSlowReader()
            }
        }
    }

    func disconnectSlowReader() {
        guard state != .closed else { return }
        settings.metrics.increment(\.slowReaderDisconnects)
        settings.logger.info(
            "control: disconnecting \(peer): it does not read its replies (\(queuedOutputBytes + heldReplyBytes) bytes queued, limit \(limits.maxQueuedOutputBytes))",
            metadata: ["peer": "\(peer)"])
        close()
    }

    /// Closes once everything written has been flushed, or after the grace period at most.
    func closeAfterFlush() {
        guard state != .closed, !closeWhenFlushed, let context else { return }
        sendOutbox()
        closeWhenFlushed = true
        idleTimer?.cancel()
        idleTimer = nil
        if queuedOutputBytes == 0 {
            close()
            return
        }
        lingerTimer = context.eventLoop.assumeIsolated().scheduleTask(in: TimeAmount(limits.shutdownGracePeriod)) { [self] in
            close()
        }
    }

    func close() {
        guard state != .closed else { return }
        state = .closed
        context?.close(promise: nil)
    }

    /// The connection is gone: stop the running command and let go of the subscription.
    private func tearDown() {
        state = .closed
        running?.cancel()
        running = nil
        idleTimer?.cancel()
        idleTimer = nil
        lingerTimer?.cancel()
        lingerTimer = nil
        stallTimer?.cancel()
        stallTimer = nil
        endSubscription()
        pending.removeAll()
        heldReplyBytes = 0
        unparsedLines = 0
        outbox = nil
    }

    // MARK: Idleness

    /// Makes sure a timer will look at the connection when it has been quiet for the idle
    /// timeout. A timer already scheduled is kept: it checks again when it fires.
    private func armIdleTimer() {
        guard state == .open, subscription == nil, !closeWhenFlushed, idleTimer == nil, let context else { return }
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
