import NIOCore

/// What the line decoder passes on: a line (without its `\r\n` or `\n`), or the news that a line
/// went over the limit, after which it passes on nothing more.
enum ControlFrame {
    case line(ByteBuffer)
    case tooLong
    /// Bytes after a stream command's line (``ControlStream``), passed on as they came.
    case raw(ByteBuffer)
}

/// Turns a connection's line decoder into a pass-through once a stream command's line has been
/// read (Protocol.md, "Stream mode"). Set by the connection handler on the event loop, inside
/// the decoder's own call that passed the line on, so the very next bytes (the tar stream an
/// `import` client sends right after its line) are never read as lines. Why not remove the
/// `ByteToMessageHandler`: on removal NIO runs `decodeLast` over what it holds, which would cut
/// those bytes into lines. Owned by the connection's event loop.
final class ControlStreamSwitch {
    var isRaw = false
}

/// Splits a connection's bytes into lines of at most `maxLineBytes` (excluding the terminator).
/// Blank lines (nothing but spaces and tabs) are skipped. A longer line is reported once as
/// ``ControlFrame/tooLong``; from then on every byte is discarded, so the buffer never holds
/// more than the limit plus one read. At end of input an unterminated last line counts as a line.
struct ControlLineDecoder: ByteToMessageDecoder {
    typealias InboundOut = ControlFrame

    let maxLineBytes: Int
    let metrics: ControlMetrics
    /// Set once the connection streams: bytes are passed on raw from then on.
    let streamSwitch: ControlStreamSwitch
    /// Bytes after the reader index already searched for a newline.
    private var scanned = 0
    private var discarding = false
    /// The largest buffer reported to the metrics (only a new high-water mark touches them).
    private var reportedInputBuffer = 0

    init(maxLineBytes: Int, metrics: ControlMetrics, streamSwitch: ControlStreamSwitch = ControlStreamSwitch()) {
        self.maxLineBytes = maxLineBytes
        self.metrics = metrics
        self.streamSwitch = streamSwitch
    }

    mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        if streamSwitch.isRaw {
            if buffer.readableBytes > 0 {
                context.fireChannelRead(wrapInboundOut(.raw(buffer.readSlice(length: buffer.readableBytes)!)))
            }
            return .needMoreData
        }
        if buffer.readableBytes > reportedInputBuffer {
            reportedInputBuffer = buffer.readableBytes
            metrics.recordMaximum(\.largestInputBuffer, reportedInputBuffer)
        }
        if discarding {
            buffer.moveReaderIndex(to: buffer.writerIndex)
            return .needMoreData
        }
        let view = buffer.readableBytesView
        guard let newline = view[(view.startIndex + scanned)...].firstIndex(of: UInt8(ascii: "\n")) else {
            scanned = view.count
            // One byte more than the limit may still be the `\r` of a `\r\n`.
            if view.count > maxLineBytes + 1 { refuse(context: context, buffer: &buffer) }
            return .needMoreData
        }
        scanned = 0
        var line = buffer.readSlice(length: newline - view.startIndex)!
        buffer.moveReaderIndex(forwardBy: 1)
        if line.readableBytesView.last == UInt8(ascii: "\r") {
            line.moveWriterIndex(to: line.writerIndex - 1)
        }
        guard line.readableBytes <= maxLineBytes else {
            refuse(context: context, buffer: &buffer)
            return .needMoreData
        }
        if !Self.isBlank(line) {
            metrics.countLineRead()
            context.fireChannelRead(wrapInboundOut(.line(line)))
        }
        return .continue
    }

    mutating func decodeLast(context: ChannelHandlerContext, buffer: inout ByteBuffer, seenEOF: Bool) throws -> DecodingState {
        if streamSwitch.isRaw { return try decode(context: context, buffer: &buffer) }
        while try decode(context: context, buffer: &buffer) == .continue {}
        if seenEOF, !discarding, buffer.readableBytes > 0 {
            var line = buffer.readSlice(length: buffer.readableBytes)!
            if line.readableBytesView.last == UInt8(ascii: "\r") {
                line.moveWriterIndex(to: line.writerIndex - 1)
            }
            if line.readableBytes <= maxLineBytes, !Self.isBlank(line) {
                metrics.countLineRead()
                context.fireChannelRead(wrapInboundOut(.line(line)))
            }
        }
        buffer.moveReaderIndex(to: buffer.writerIndex)
        return .needMoreData
    }

    private mutating func refuse(context: ChannelHandlerContext, buffer: inout ByteBuffer) {
        discarding = true
        buffer.moveReaderIndex(to: buffer.writerIndex)
        context.fireChannelRead(wrapInboundOut(.tooLong))
    }

    private static func isBlank(_ line: ByteBuffer) -> Bool {
        line.readableBytesView.allSatisfy { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") }
    }
}
