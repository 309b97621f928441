import NIOCore

/// The time limits of one HTTP connection, first in its pipeline, where it sees the raw bytes:
/// - a request head must arrive whole within `http-header-timeout` of its first byte, else a
///   `408` is written (as raw bytes: no request is in progress for the HTTP handlers to answer)
///   and the connection closes; a client dripping its head (slowloris) meets this;
/// - a connection with no request for `http-idle-timeout` after its last response (or since it
///   opened) is closed without a word.
///
/// The connection handler tells it when a head has arrived and when a response has ended; both
/// run on the connection's event loop. One timer at a time: a request moves the deadline, and the
/// timer, when it fires early, sleeps again until the deadline (scheduling and cancelling a timer
/// for every request cost a tenth of a keep-alive hit's time, measured).
final class HTTPFaceDeadlines: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private enum State {
        /// No request: waiting for the first byte of one.
        case idle
        /// Bytes of a head came, the head is not whole yet.
        case readingHead
        /// A request is being answered; bytes may arrive (a pipelined request).
        case answering(bytesSinceHead: Bool)
    }

    private let headerTimeout: TimeAmount
    private let idleTimeout: TimeAmount
    private let timeoutResponse: ByteBuffer
    private var state = State.idle
    /// When the state in force expires (none while a request is answered).
    private var deadline: NIODeadline?
    /// The timer that checks ``deadline``; at most one.
    private var timer: Scheduled<Void>?
    private var context: ChannelHandlerContext?
    /// Counted when a head times out.
    private let onHeaderTimeout: () -> Void

    init(limits: HTTPFaceLimits, onHeaderTimeout: @escaping () -> Void) {
        headerTimeout = TimeAmount(limits.headerTimeout)
        idleTimeout = TimeAmount(limits.idleTimeout)
        timeoutResponse = HTTPFaceResponse.raw(.headerTimeout(limits.headerTimeout))
        self.onHeaderTimeout = onHeaderTimeout
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        if context.channel.isActive { expire(in: idleTimeout) }
    }

    func channelActive(context: ChannelHandlerContext) {
        expire(in: idleTimeout)
        context.fireChannelActive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
        self.context = nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch state {
        case .idle:
            state = .readingHead
            expire(in: headerTimeout)
        case .answering(false):
            state = .answering(bytesSinceHead: true)
        case .readingHead, .answering(true):
            break
        }
        context.fireChannelRead(data)
    }

    /// A whole request head arrived: no deadline while it is answered.
    func headReceived() {
        deadline = nil
        state = .answering(bytesSinceHead: false)
    }

    /// A response's last part was written: the next head (already begun if bytes came since the
    /// last head) has the header timeout, an idle connection the idle timeout.
    func responseEnded() {
        guard case .answering(let bytesSinceHead) = state else { return }
        if bytesSinceHead {
            state = .readingHead
            expire(in: headerTimeout)
        } else {
            state = .idle
            expire(in: idleTimeout)
        }
    }

    /// Sets the deadline `delay` from now; a timer is scheduled only when none is.
    private func expire(in delay: TimeAmount) {
        let at = NIODeadline.now() + delay
        deadline = at
        if timer == nil { schedule(at) }
    }

    private func schedule(_ at: NIODeadline) {
        guard let context else { return }
        timer = context.eventLoop.assumeIsolated().scheduleTask(deadline: at) { [self] in
            timer = nil
            fire()
        }
    }

    private func fire() {
        guard let context, let deadline else { return }  // answering: the next state sets one
        guard NIODeadline.now() >= deadline else {
            schedule(deadline)
            return
        }
        switch state {
        case .readingHead:
            onHeaderTimeout()
            context.writeAndFlush(NIOAny(timeoutResponse)).assumeIsolated().whenComplete { _ in context.close(promise: nil) }
        case .idle:
            context.close(promise: nil)
        case .answering:
            break
        }
    }
}
