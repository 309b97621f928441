import NIOCore

/// Counts and remembers a TLS connection of a ``TestHTTPServer`` (so ``TestHTTPServer/shutdown()``
/// can close it), from the TCP channel itself: its HTTP handlers are added only once ALPN has
/// chosen a protocol, after the channel became active, and an HTTP/2 connection carries many
/// streams that are not connections.
final class TestConnectionTracker: ChannelInboundHandler {
    typealias InboundIn = NIOAny

    private let state: TestHTTPServerState

    init(state: TestHTTPServerState) {
        self.state = state
    }

    func channelActive(context: ChannelHandlerContext) {
        if !state.connectionOpened(context.channel) {
            context.close(promise: nil)
        }
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        state.connectionClosed(context.channel)
        context.fireChannelInactive()
    }
}
