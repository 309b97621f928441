import NIOCore

/// The time limits of one HTTP connection, first in its pipeline, where it sees the raw bytes:
/// - a request head must arrive whole within `http-header-timeout` of its first byte, else a
///   `408` is written (as raw bytes: no request is in progress for the HTTP handlers to answer)
///   and the connection closes; a client dripping its head (slowloris) meets this;
/// - a connection with no request for `http-idle-timeout` after its last response (or since it
///   opened) is closed without a word.
///
/// The connection handler tells it when a head has arrived and when a response has ended; both
/// run on the connection's event loop.
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
        if context.channel.isActive { arm(idleTimeout, context: context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        arm(idleTimeout, context: context)
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
            arm(headerTimeout, context: context)
        case .answering(false):
            state = .answering(bytesSinceHead: true)
        case .readingHead, .answering(true):
            break
        }
        context.fireChannelRead(data)
    }

    /// A whole request head arrived: no deadline while it is answered.
    func headReceived() {
        timer?.cancel()
        timer = nil
        state = .answering(bytesSinceHead: false)
    }

    /// A response's last part was written: the next head (already begun if bytes came since the
    /// last head) has the header timeout, an idle connection the idle timeout.
    func responseEnded() {
        guard let context, case .answering(let bytesSinceHead) = state else { return }
        if bytesSinceHead {
            state = .readingHead
            arm(headerTimeout, context: context)
        } else {
            state = .idle
            arm(idleTimeout, context: context)
        }
    }

    private func arm(_ delay: TimeAmount, context: ChannelHandlerContext) {
        timer?.cancel()
        timer = context.eventLoop.assumeIsolated().scheduleTask(in: delay) { [self] in
            timer = nil
            expire()
        }
    }

    private func expire() {
        guard let context else { return }
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
