import ImgdCore
@_spi(Fuzzing) import ImgdDaemon
import ImgdProtocol
import Logging
import NIOCore
import NIOEmbedded

/// Feeds the input to a connection built as the control server builds one
/// (``ControlConnectionPipeline``), in random chunk sizes and under random limits, and reads
/// what it writes back. Requires:
/// - every byte written back is a `\n`-ended line holding a JSON object with a boolean `ok`;
/// - every request the handler answered comes back with its arguments unchanged: what the
///   parser read, the encoder wrote and the parser reads again is the same value.
enum ControlLineFuzzTarget {
    static func run(_ input: inout FuzzInput) throws(FuzzFinding) {
        let chunkSizes = (0..<Int(input.byte() % 4 + 1)).map { _ in input.pick([1, 2, 3, 7, 16, 100, 4096, 65536]) }
        let limits = ControlLimits(
            maxLineBytes: input.pick([1_048_576, 16, 64, 300]),
            maxPendingRequests: input.pick([64, 1, 3]))
        let closesInput = input.byte() & 1 == 0
        let payload = input.payload

        let handler = EchoingCommandHandler()
        let channel = EmbeddedChannel()
        defer { _ = try? channel.finish(acceptAlreadyClosed: true) }
        do {
            try ControlConnectionPipeline.addHandlers(
                to: channel.pipeline.syncOperations, limits: limits, handler: handler, events: EventHub(),
                peer: ControlPeer(pid: 1, uid: 0, gid: 0), logger: Logger(label: "fuzz") { _ in SwiftLogNoOpLogHandler() })
            try channel.connect(to: SocketAddress(unixDomainSocketPath: "/fuzz")).wait()
            var offset = 0
            var turn = 0
            while offset < payload.count, channel.isActive {
                let size = min(chunkSizes[turn % chunkSizes.count], payload.count - offset)
                try channel.writeInbound(ByteBuffer(bytes: payload[offset..<offset + size]))
                offset += size
                turn += 1
            }
            if closesInput, channel.isActive {
                channel.pipeline.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
            }
        } catch {
            // The connection refused the bytes (closed it, say); what it wrote so far is checked.
        }

        var written = ByteBuffer()
        while let piece = try? channel.readOutbound(as: ByteBuffer.self) {
            written.writeImmutableBuffer(piece)
        }
        try check(written, answered: handler.answered)
    }

    private static func check(_ written: ByteBuffer, answered: [JSONValue]) throws(FuzzFinding) {
        let bytes = Array(written.readableBytesView)
        guard bytes.isEmpty || bytes.last == UInt8(ascii: "\n") else {
            throw FuzzFinding(target: "control-line", "output does not end with a newline: \(EchoedText.escape(bytes: bytes))")
        }
        var echoes: [JSONValue] = []
        for line in bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).dropLast() {
            let text = String(decoding: line, as: UTF8.self)
            guard String(validating: line, as: UTF8.self) != nil,
                case .object(let reply)? = try? JSONValue(parsing: text), case .bool(let ok)? = reply["ok"]
            else {
                throw FuzzFinding(target: "control-line", "a reply that is not a JSON object with \"ok\": \(EchoedText.escape(bytes: Array(line)))")
            }
            if ok, case .object(let result)? = reply["result"], let echo = result[EchoingCommandHandler.echoKey] {
                echoes.append(echo)
            }
        }
        guard echoes == Array(answered.prefix(echoes.count)) else {
            let first = zip(echoes, answered).first { $0 != $1 }
            throw FuzzFinding(
                target: "control-line",
                "arguments changed on their way back: sent \(String(describing: first?.1)), echoed \(String(describing: first?.0))")
        }
    }
}
