import NIOHTTP1

/// What an HTTP request asks the face for, read from its method, target and headers alone
/// (pure: fuzzed, and tested without a socket).
enum HTTPFaceRoute: Sendable, Equatable {
    /// An image: `/image?url=…` or the path form `/<scheme>/<host>[:port]/<path>[?query]`.
    case image(ImageQuery)
    /// `/metrics`: the counters, gauges and histograms in Prometheus' text format.
    case metrics
    /// `/healthz`: whether the daemon's loops turn.
    case healthz
    /// `/readyz`: whether the ready lists are cached.
    case readyz

    /// The route of a request, or the error it is answered with.
    static func of(_ head: HTTPRequestHead) -> Result<HTTPFaceRoute, HTTPFaceError> {
        guard head.method == .GET || head.method == .HEAD else {
            return .failure(.methodNotAllowed(head.method.rawValue))
        }
        let target = head.uri
        // Origin form only: an absolute URL (a proxy request), `*` or an authority is no path.
        guard target.hasPrefix("/") else {
            return .failure(.badRequest("the request target must be a path starting with /, not \(Self.quoted(target))"))
        }
        let path: Substring, query: Substring?
        if let mark = target.firstIndex(of: "?") {
            path = target[..<mark]
            query = target[target.index(after: mark)...]
        } else {
            path = target[...]
            query = nil
        }
        switch path {
        case "/image":
            return ImageQuery.parse(query: query ?? "").map(HTTPFaceRoute.image)
        case "/metrics": return .success(.metrics)
        case "/healthz": return .success(.healthz)
        case "/readyz": return .success(.readyz)
        default:
            if path.hasPrefix("/http/") {
                return ImageQuery.pathForm(scheme: "http", rest: target.dropFirst(6), headers: head.headers).map(HTTPFaceRoute.image)
            }
            if path.hasPrefix("/https/") {
                return ImageQuery.pathForm(scheme: "https", rest: target.dropFirst(7), headers: head.headers).map(HTTPFaceRoute.image)
            }
            return .failure(.notFound("no such resource: \(Self.quoted(String(path))) (try /image?url=…, /https/HOST/PATH, /metrics, /healthz, /readyz)"))
        }
    }

    /// `text` for a message: at most 200 characters, control characters escaped.
    static func quoted(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars.prefix(200) {
            if scalar.value < 0x20 || scalar.value == 0x7f {
                out += "\\u{\(String(scalar.value, radix: 16))}"
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return text.unicodeScalars.count > 200 ? out + "…" : out
    }
}
