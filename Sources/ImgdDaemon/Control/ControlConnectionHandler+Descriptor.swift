import CDescriptorPassing
import ImgdProtocol
import NIOCore

#if canImport(Glibc)
import Glibc
#endif

/// Passing a descriptor with a reply (`get` with `"fd": true`, Protocol.md).
///
/// NIO has no way to send a control message, but it lends a channel's socket on its event loop
/// (`withUnsafeTransportIfAvailable`). So the reply line goes through NIO without its final
/// `\n`; once that write has completed (the line, and everything written before it, is in the
/// kernel), the `\n` is sent straight on the socket with the descriptor attached, from the loop.
/// Until then nothing else is written (``ControlConnectionHandler/passing`` is a barrier: no
/// request starts, no event goes out), so the `\n` follows its line at once and the client finds
/// the descriptor on the byte that ends its reply. One descriptor per connection at a time, so
/// the daemon holds at most `max-connections` of them.
extension ControlConnectionHandler {
    /// A descriptor on its way to the client.
    final class DescriptorPass {
        /// The daemon's copy, closed when this goes (sent, or the connection closed first).
        let descriptor: PassedDescriptor
        /// When the reply was handed to the channel: the slow-reader timeout counts from here.
        let since: NIODeadline
        /// The wait before the next try when the socket's buffer is full (1 ms doubling to 64 ms).
        var delay = TimeAmount.milliseconds(1)
        var retryTimer: Scheduled<Void>?

        init(descriptor: PassedDescriptor, since: NIODeadline) {
            self.descriptor = descriptor
            self.since = since
        }
    }

    /// A reply line and the descriptor to pass with it, from the command's task.
    struct PassedReply: Sendable {
        let line: ByteBuffer
        let descriptor: PassedDescriptor?
    }

    /// Runs `request`, which asks for a descriptor, through the handler; the reply is written
    /// back on the loop, with the descriptor when there is one.
    func runPassingDescriptor(_ request: ControlRequest, context: ChannelHandlerContext) {
        let handler = settings.handler
        let id = request.id
        let promise = context.eventLoop.makePromise(of: PassedReply.self)
        running = promise.completeWithTask {
            let (result, descriptor) = await handler.handlePassingDescriptor(request)
            return PassedReply(line: ControlLine.reply(id: id, result), descriptor: descriptor)
        }
        promise.futureResult.assumeIsolated().whenComplete { [self] outcome in
            running = nil
            waitingRequests -= 1
            // Closed meanwhile: the reply, and the descriptor with it, are dropped (closed).
            guard state != .closed else { return }
            let reply: PassedReply
            switch outcome {
            case .success(let passed): reply = passed
            case .failure(let error):
                reply = PassedReply(
                    line: ControlLine.reply(id: id, .failure(.other(code: "internal", message: "the command failed: \(error)"))),
                    descriptor: nil)
            }
            if let descriptor = reply.descriptor {
                writePassing(reply.line, descriptor: descriptor)
                return
            }
            collectingOutput = true
            write(reply.line, isEvent: false)
            drain()
            endOutputBatch()
        }
    }

    /// Writes `line` but its `\n` through the channel; the `\n` follows with `descriptor` once
    /// the line is in the kernel.
    private func writePassing(_ line: ByteBuffer, descriptor: PassedDescriptor) {
        guard let context else { return }
        var head = line
        head.moveWriterIndex(to: head.writerIndex - 1)  // the line's `\n` goes with the descriptor
        passing = DescriptorPass(descriptor: descriptor, since: .now())
        sendOutbox()
        let size = head.readableBytes
        grew(output.write(size, now: .now()))
        settings.metrics.countWrite()
        let promise = context.eventLoop.makePromise(of: Void.self)
        promise.futureResult.assumeIsolated().whenComplete { [self] result in
            output.taken(size, events: 0, now: .now())
            if case .success = result { passDescriptor() }
            written()
        }
        context.writeAndFlush(wrapOutboundOut(head), promise: promise)
    }

    /// Sends the `\n` with the descriptor; tries again later while the socket's buffer is full,
    /// and gives the client up as a slow reader past the slow-reader timeout.
    private func passDescriptor() {
        guard let pass = passing, state != .closed, let context else { return }
        let outcome: Int? = try? context.pipeline.syncOperations.withUnsafeTransportIfAvailable(of: NIOBSDSocket.Handle.self) {
            socket in
            var newline = UInt8(ascii: "\n")
            let sent = imgd_send_with_descriptor(socket, &newline, 1, pass.descriptor.rawValue)
            return sent < 0 ? -Int(errno) : sent
        }
        let full = [-Int(EAGAIN), -Int(EWOULDBLOCK), -Int(ENOBUFS)]
        switch outcome {
        case 1?:
            finishPass()
        case let code? where full.contains(code):
            guard NIODeadline.now() - pass.since < TimeAmount(limits.slowReaderTimeout) else {
                disconnectSlowReader()
                return
            }
            let delay = pass.delay
            pass.delay = min(delay * 2, .milliseconds(64))
            pass.retryTimer = context.eventLoop.assumeIsolated().scheduleTask(in: delay) { [self] in
                passing?.retryTimer = nil
                passDescriptor()
            }
        case nil:
            // A channel without a socket (the fuzzer's in-memory one): the line ends, no descriptor.
            passing = nil
            write(ByteBuffer(string: "\n"), isEvent: false)
            finishPass()
        default:
            // The client went away (EPIPE, ECONNRESET): nothing more to send it.
            close()
        }
    }

    /// The descriptor went (or could not): the daemon's copy is closed and what waited goes on.
    private func finishPass() {
        passing = nil
        guard state != .closed else { return }
        collectingOutput = true
        drain()
        endOutputBatch()
        sendDropNoticeIfReady()
    }
}
