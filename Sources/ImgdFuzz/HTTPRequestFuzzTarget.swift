import ImgdCore
@_spi(Fuzzing) import ImgdDaemon
import NIOCore
import NIOEmbedded

/// Feeds the input to an HTTP connection built as the HTTP face builds one
/// (``HTTPFacePipeline``), with no daemon behind it, in random chunk sizes and under a random
/// head limit, and reads what it writes back. Requires:
/// - everything written back is a sequence of HTTP/1.1 responses, each error (4xx, 5xx) with
///   its `X-Imgd-Error`;
/// - the input's first head, read as the face reads one, keeps the route invariants
///   (``HTTPFacePipeline/violation(method:target:headers:size:)``).
enum HTTPRequestFuzzTarget {
    static func run(_ input: inout FuzzInput) throws(FuzzFinding) {
        let chunkSizes = (0..<Int(input.byte() % 4 + 1)).map { _ in input.pick([1, 2, 3, 7, 16, 100, 4096, 65536]) }
        let limits = HTTPFaceLimits(maxHeaderBytes: input.pick([32 * 1024, 64, 300, 1024]))
        let overTCP = input.byte() & 1 == 0
        let size = input.uint16()
        let payload = input.payload

        let channel = EmbeddedChannel()
        defer { _ = try? channel.finish(acceptAlreadyClosed: true) }
        do {
            try HTTPFacePipeline.addDetachedHandlers(to: channel.pipeline.syncOperations, limits: limits, overTCP: overTCP)
            try channel.connect(to: SocketAddress(unixDomainSocketPath: "/fuzz")).wait()
            var offset = 0
            var turn = 0
            while offset < payload.count, channel.isActive {
                let chunk = min(chunkSizes[turn % chunkSizes.count], payload.count - offset)
                try channel.writeInbound(ByteBuffer(bytes: payload[offset..<offset + chunk]))
                offset += chunk
                turn += 1
            }
        } catch {
            // The connection refused the bytes (closed it); what it wrote so far is checked.
        }
        var written: [UInt8] = []
        while let piece = try? channel.readOutbound(as: IOData.self) {
            if case .byteBuffer(let buffer) = piece { written += buffer.readableBytesView }
        }
        try checkResponses(written)
        if let head = firstHead(payload), let broken = HTTPFacePipeline.violation(method: head.method, target: head.target, headers: head.headers, size: size) {
            throw FuzzFinding(target: "http-request", broken)
        }
    }

    /// Each response: a status line `HTTP/1.1 NNN`, headers, a body of its `Content-Length`.
    private static func checkResponses(_ bytes: [UInt8]) throws(FuzzFinding) {
        var rest = bytes[...]
        let separator = Array("\r\n\r\n".utf8)
        while !rest.isEmpty {
            guard let end = rest.firstRange(of: separator) else {
                throw FuzzFinding(target: "http-request", "output that is not a whole response head: \(EchoedText.escape(bytes: Array(rest.prefix(200))))")
            }
            let head = String(decoding: rest[..<end.lowerBound], as: UTF8.self)
            rest = rest[end.upperBound...]
            let lines = head.split(separator: "\r\n", omittingEmptySubsequences: false)
            guard let status = lines.first, status.hasPrefix("HTTP/1.1 "), let code = Int(status.dropFirst(9).prefix(3)) else {
                throw FuzzFinding(target: "http-request", "a response that does not start with HTTP/1.1 and a status: \(head.prefix(200))")
            }
            var length = 0
            var hasErrorCode = false
            for line in lines.dropFirst() {
                let lower = line.lowercased()
                if lower.hasPrefix("content-length:") { length = Int(lower.dropFirst(15).trimmingPrefix(" ")) ?? -1 }
                if lower.hasPrefix("x-imgd-error:") { hasErrorCode = true }
            }
            guard length >= 0, code < 400 || hasErrorCode else {
                throw FuzzFinding(target: "http-request", "an error without X-Imgd-Error, or a bad Content-Length: \(head.prefix(300))")
            }
            // A HEAD's answer has no body: when the next response starts right here, this one
            // had none.
            if !rest.starts(with: Array("HTTP/1.1 ".utf8)) { rest = rest.dropFirst(min(length, rest.count)) }
        }
    }

    /// The first request head of `payload`, split as text: method, target and headers.
    private static func firstHead(_ payload: [UInt8]) -> (method: String, target: String, headers: [(String, String)])? {
        let text = String(decoding: payload.prefix(8192), as: UTF8.self)
        let lines = text.split(separator: "\r\n", omittingEmptySubsequences: false)
        guard let first = lines.first else { return nil }
        let parts = first.split(separator: " ")
        guard parts.count == 3 else { return nil }
        var headers: [(String, String)] = []
        for line in lines.dropFirst() {
            if line.isEmpty { break }
            guard let colon = line.firstIndex(of: ":") else { return nil }
            headers.append((String(line[..<colon]), String(line[line.index(after: colon)...].trimmingPrefix(" "))))
        }
        return (String(parts[0]), String(parts[1]), headers)
    }
}
