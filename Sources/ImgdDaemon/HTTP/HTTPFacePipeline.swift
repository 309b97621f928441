import Logging
import NIOCore
import NIOHTTP1

/// The handlers that serve one admitted HTTP connection: the deadlines on the raw bytes, NIO's
/// HTTP/1.1 decoder, encoder and pipelining handler, then the connection handler. The server
/// builds every connection with it, and the fuzzer builds its in-memory connections with it, so
/// what is fuzzed is the face's own parsing and answering.
@_spi(Fuzzing)
public enum HTTPFacePipeline {
    static func addHandlers(to pipeline: ChannelPipeline.SynchronousOperations, settings: HTTPFaceSettings, peer: ControlPeer) throws {
        let metrics = settings.metrics
        let deadlines = HTTPFaceDeadlines(limits: settings.limits) { metrics.increment(.headerTimeouts) }
        try pipeline.addHandler(deadlines)
        var decoderLimits = NIOHTTPDecoderLimitConfiguration()
        decoderLimits.maxHeaderFieldSize = settings.limits.maxHeaderBytes
        decoderLimits.maxHeaderListSize = settings.limits.maxHeaderBytes
        // No outbound header validation: every header is written by HTTPFaceResponder from imgd's
        // own values (an origin's Last-Modified only in an IMF-fixdate's printable shape), and
        // the check cost a tenth of a keep-alive hit's time (measured).
        try pipeline.configureHTTPServerPipeline(
            withPipeliningAssistance: true, withErrorHandling: false, withOutboundHeaderValidation: false,
            withEncoderConfiguration: .init(), withDecoderLimitConfiguration: decoderLimits)
        try pipeline.addHandler(HTTPFaceConnectionHandler(settings: settings, peer: peer, deadlines: deadlines))
    }

    /// Adds the handlers a face with `limits` gives a connection (over TCP when `overTCP`), with
    /// no daemon behind it: every image is answered `503 shutting_down`, as during a start.
    public static func addDetachedHandlers(to pipeline: ChannelPipeline.SynchronousOperations, limits: HTTPFaceLimits, overTCP: Bool) throws {
        let settings = HTTPFaceSettings(
            limits: limits, backend: HTTPFaceBackend(), metrics: HTTPFaceMetrics(),
            logger: Logger(label: "fuzz") { _ in SwiftLogNoOpLogHandler() }, isTCP: overTCP)
        try addHandlers(to: pipeline, settings: settings, peer: ControlPeer(pid: 1, uid: 0, gid: 0))
    }

    /// The invariants of reading one request head, for the fuzzer: nil when they hold, else what
    /// broke. A route is read the same twice; the path form's URL is the scheme, `://` and the
    /// target's rest, with a host and no user information; a range lies inside the image.
    public static func violation(method: String, target: String, headers: [(String, String)], size: Int) -> String? {
        let head = HTTPRequestHead(version: .http1_1, method: HTTPMethod(rawValue: method), uri: target, headers: HTTPHeaders(headers))
        let first = HTTPFaceRoute.of(head), second = HTTPFaceRoute.of(head)
        guard first == second else { return "two reads of one head differ: \(first) / \(second)" }
        switch first {
        case .success(.image(let query)):
            guard query.url.hasPrefix("http://") || query.url.hasPrefix("https://") || target.hasPrefix("/image") else {
                return "a path form read as a URL that is not http(s): \(query.url)"
            }
            if !target.hasPrefix("/image"), let separator = query.url.firstRange(of: "://") {
                let rest = query.url[separator.upperBound...]
                let authority = rest.prefix { $0 != "/" && $0 != "?" }
                guard !authority.isEmpty, !authority.contains("@") else { return "a path form without a clean host: \(query.url)" }
            }
        case .failure(let error):
            guard (400..<500).contains(Int(error.status.code)), !error.code.isEmpty else { return "a refusal that is not a 4xx with a code: \(error)" }
        case .success:
            break
        }
        for (name, value) in headers where name.lowercased() == "range" {
            switch ByteRangeRequest.of(value, size: size) {
            case .partial(let range):
                guard range.lowerBound >= 0, range.upperBound <= size, !range.isEmpty else { return "range \(range) of \(value) outside \(size) bytes" }
            case .unsatisfiable, .whole:
                break
            }
        }
        return nil
    }
}
