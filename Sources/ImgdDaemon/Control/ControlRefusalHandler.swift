import NIOCore

/// Answers a connection the server will not serve (`busy`, `shutting_down`) with one line,
/// then closes it. Whatever the client sends is ignored.
final class ControlRefusalHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// How long the line may take to reach the kernel before the connection is closed anyway.
    private static let linger = TimeAmount.seconds(2)

    private let line: ByteBuffer

    init(line: ByteBuffer) {
        self.line = line
    }

    func channelActive(context: ChannelHandlerContext) {
        let timeout = context.eventLoop.assumeIsolated().scheduleTask(in: Self.linger) {
            context.close(promise: nil)
        }
        context.writeAndFlush(wrapOutboundOut(line)).assumeIsolated().whenComplete { _ in
            timeout.cancel()
            context.close(promise: nil)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {}

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}
