import NIOHTTP1

extension TestHTTPServer {
    /// A response's status, route-specific headers and whole body, before delivery; framing
    /// headers (`Content-Length`, `Transfer-Encoding`, `Connection`) are added by ``head(framing:keepAlive:)``.
    struct Response: Sendable {
        var status: Int
        var headers: [(name: String, value: String)] = []
        var body: [UInt8]

        /// Statuses whose responses never carry a body (RFC 9110 §6.4.1).
        var forbidsBody: Bool { (100..<200).contains(status) || status == 204 || status == 304 }

        /// The status line and headers, written by hand rather than through NIO's encoder: the
        /// server must be able to lie about the length and frame bodies in ways an encoder refuses.
        func head(framing: Behaviour.Framing, keepAlive: Bool) -> String {
            let reason = HTTPResponseStatus(statusCode: status).reasonPhrase
            var lines = ["HTTP/1.1 \(status) \(reason.isEmpty ? "Status" : reason)"]
            for header in headers { lines.append("\(header.name): \(header.value)") }
            if !forbidsBody {
                switch framing {
                case .contentLength(let delta): lines.append("Content-Length: \(max(0, body.count + delta))")
                case .closeDelimited: break
                case .chunked: lines.append("Transfer-Encoding: chunked")
                }
            }
            lines.append(keepAlive ? "Connection: keep-alive" : "Connection: close")
            return lines.joined(separator: "\r\n") + "\r\n\r\n"
        }

        /// A small HTML body for statuses and redirects, so clients have something to (not) store.
        static func page(status: Int, headers: [(name: String, value: String)] = []) -> Response {
            let reason = HTTPResponseStatus(statusCode: status).reasonPhrase
            let html = "<!DOCTYPE html><html><body>\(status) \(reason)</body></html>\n"
            return Response(
                status: status, headers: [("Content-Type", "text/html")] + headers, body: Array(html.utf8))
        }
    }
}
