import ImgdProtocol
import Logging
import NIOCore

/// A connection a stream command took over (Protocol.md, "Stream mode"), after the
/// ``ControlConnectionHandler`` that passed it on.
///
/// Sending (`export`, `manifest`): the reply line, then each chunk the source gives, the next
/// asked for only once the last was written and the channel is writable again, then the
/// connection closes. Receiving (`import`): each read goes to the sink, and no more is read
/// (the `read` event is held) until the sink has taken it, so a fast client fills its own
/// socket buffer, not the daemon's memory; at the client's half-close the sink's reply is sent
/// and the connection closes. A connection on which nothing moves for the idle timeout (a
/// client that stopped sending or reading) is closed, and the source or sink let go.
///
/// Runs on the channel's event loop, which owns its state; the source and sink run in tasks
/// whose results come back to the loop through promises.
final class ControlStreamHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private enum Phase {
        /// The command is being opened (its arguments checked, its source or sink made).
        case opening
        case sending(any ControlStreamSource)
        case receiving(any ControlStreamSink)
        /// The reply or the last chunk has been written: closing once flushed.
        case done
    }

    private let request: ControlRequest
    private let handler: any ControlCommandHandler
    private let limits: ControlLimits
    private let logger: Logger
    private var context: ChannelHandlerContext?
    private var phase = Phase.opening
    /// A task (a chunk asked for, bytes consumed) is running: nothing else starts meanwhile.
    private var busy = false
    /// Bytes read while the sink was busy (at most one read: reads are held meanwhile).
    private var received: ByteBuffer?
    private var inputEnded = false
    private var readHeld = false
    /// A chunk was written and the channel was not writable: the next waits for writability.
    private var waitingForWritable = false
    private var lastProgress = NIODeadline.now()
    private var stallTimer: Scheduled<Void>?

    init(request: ControlRequest, handler: any ControlCommandHandler, limits: ControlLimits, logger: Logger) {
        self.request = request
        self.handler = handler
        self.limits = limits
        self.logger = logger
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        armStallTimer()
        let handler = self.handler, request = self.request
        busy = true
        let promise = context.eventLoop.makePromise(of: Result<ControlStream, ControlError>.self)
        promise.completeWithTask { await handler.openStream(request) }
        promise.futureResult.assumeIsolated().whenSuccess { [self] outcome in
            busy = false
            opened(outcome)
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        abandon()
        self.context = nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        abandon()
        context.fireChannelInactive()
    }

    // MARK: Opening

    private func opened(_ outcome: Result<ControlStream, ControlError>) {
        guard let context, case .opening = phase else { return }
        switch outcome {
        case .failure(let error):
            phase = .done
            writeLast(ControlLine.reply(id: request.id, .failure(error)))
        case .success(.sending(let reply, let source)):
            phase = .sending(source)
            context.write(wrapOutboundOut(ControlLine.reply(id: request.id, .success(reply))), promise: nil)
            nextChunk()
        case .success(.receiving(let sink)):
            phase = .receiving(sink)
            if received != nil || inputEnded { consumeReceived() }
            if readHeld {
                readHeld = false
                context.read()
            }
        }
    }

    // MARK: Sending

    private func nextChunk() {
        guard let context, case .sending(let source) = phase, !busy else { return }
        busy = true
        let promise = context.eventLoop.makePromise(of: ByteBuffer?.self)
        promise.completeWithTask { try await source.next() }
        promise.futureResult.assumeIsolated().whenComplete { [self] outcome in
            busy = false
            guard let context = self.context, case .sending = phase else { return }
            switch outcome {
            case .success(let chunk?):
                let written = context.eventLoop.makePromise(of: Void.self)
                written.futureResult.assumeIsolated().whenSuccess { [self] in
                    lastProgress = .now()
                    if self.context?.channel.isWritable ?? false { nextChunk() } else { waitingForWritable = true }
                }
                context.writeAndFlush(wrapOutboundOut(chunk), promise: written)
            case .success(nil):
                phase = .done
                finishClosing()
            case .failure(let error):
                // The client sees a stream cut short (no end-of-archive): say why in the journal.
                logger.warning("control: \(request.command) stopped: \(error)")
                phase = .done
                finishClosing()
            }
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable, waitingForWritable {
            waitingForWritable = false
            nextChunk()
        }
        context.fireChannelWritabilityChanged()
    }

    // MARK: Receiving

    /// Held while a chunk is being consumed (or the command is still opening).
    func read(context: ChannelHandlerContext) {
        switch phase {
        case .receiving where !busy && received == nil:
            context.read()
        case .opening, .receiving:
            readHeld = true
        case .sending, .done:
            // A sending stream reads nothing it needs; reading on notices the client leaving.
            context.read()
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = unwrapInboundIn(data)
        lastProgress = .now()
        switch phase {
        case .opening, .receiving:
            if received == nil { received = bytes } else { received!.writeBuffer(&bytes) }
            consumeReceived()
        case .sending, .done:
            break  // bytes after an export's line mean nothing
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? ChannelEvent, event == .inputClosed {
            inputEnded = true
            consumeReceived()
        } else {
            context.fireUserInboundEventTriggered(event)
        }
    }

    /// Hands what was read to the sink; at the end, asks it for the reply.
    private func consumeReceived() {
        guard let context, case .receiving(let sink) = phase, !busy else { return }
        if let bytes = received {
            received = nil
            busy = true
            let promise = context.eventLoop.makePromise(of: Void.self)
            promise.completeWithTask { await sink.consume(bytes) }
            promise.futureResult.assumeIsolated().whenComplete { [self] _ in
                busy = false
                lastProgress = .now()
                if received != nil || inputEnded {
                    consumeReceived()
                } else if readHeld {
                    readHeld = false
                    self.context?.read()
                }
            }
        } else if inputEnded {
            busy = true
            let promise = context.eventLoop.makePromise(of: JSONValue.self)
            promise.completeWithTask { await sink.finish() }
            promise.futureResult.assumeIsolated().whenSuccess { [self] reply in
                busy = false
                phase = .done
                writeLast(ControlLine.reply(id: request.id, .success(reply)))
            }
        }
    }

    // MARK: Ending

    /// Writes `line`, then closes.
    private func writeLast(_ line: ByteBuffer) {
        guard let context else { return }
        context.writeAndFlush(wrapOutboundOut(line)).assumeIsolated().whenComplete { [self] _ in finishClosing() }
    }

    private func finishClosing() {
        stallTimer?.cancel()
        stallTimer = nil
        context?.flush()
        context?.close(promise: nil)
    }

    /// The connection went before the end: the source or sink lets go (temp files, open entries).
    private func abandon() {
        stallTimer?.cancel()
        stallTimer = nil
        switch phase {
        case .sending(let source):
            phase = .done
            Task { await source.abandon() }
        case .receiving(let sink):
            phase = .done
            Task { await sink.abandon() }
        case .opening, .done:
            phase = .done
        }
    }

    /// Closes a connection on which nothing moved for the idle timeout while the daemon waited
    /// on the client (not while a chunk is being made or consumed, which is the daemon's time).
    private func armStallTimer() {
        guard let context else { return }
        let timeout = TimeAmount(limits.idleTimeout)
        stallTimer = context.eventLoop.assumeIsolated().scheduleTask(deadline: lastProgress + timeout) { [self] in
            stallTimer = nil
            if case .done = phase { return }
            if busy || NIODeadline.now() < lastProgress + timeout {
                if busy { lastProgress = .now() }
                armStallTimer()
                return
            }
            logger.info("control: \(request.command) closed: the client moved nothing for \(limits.idleTimeout)")
            abandon()
            self.context?.close(promise: nil)
        }
    }
}
