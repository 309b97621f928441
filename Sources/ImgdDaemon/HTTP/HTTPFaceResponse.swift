import ImgdCore
import ImgdProtocol
import ImgdStore
import NIOCore
import NIOHTTP1

/// One response of the HTTP face: its head and where its body comes from.
struct HTTPFaceResponse {
    /// Where the body's bytes come from.
    enum Body {
        case none
        /// Bytes in memory (a memory-tier hit, an error's JSON, `/metrics`).
        case bytes(ByteBuffer)
        /// A range of an open cache file, sent by the kernel (`sendfile`) without passing
        /// through imgd; the handle is closed once the write has completed or failed.
        case file(NIOFileHandle, Range<Int>)
    }

    var status: HTTPResponseStatus
    var headers: HTTPHeaders
    var body: Body

    /// An error: `X-Imgd-Error: <code>` and `{"code": …, "message": …}`, never stored by a
    /// cache on the way (`Cache-Control: no-store`).
    static func error(_ error: HTTPFaceError) -> HTTPFaceResponse {
        var body = ByteBuffer()
        body.writeJSONValue(["code": .string(error.code), "message": .string(error.message)])
        body.writeStaticString("\n")
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "application/json")
        headers.add(name: "Content-Length", value: "\(body.readableBytes)")
        headers.add(name: "Cache-Control", value: "no-store")
        headers.add(name: "X-Imgd-Error", value: error.code)
        if let seconds = error.retryAfter { headers.add(name: "Retry-After", value: "\(seconds)") }
        if error.status == .methodNotAllowed { headers.add(name: "Allow", value: "GET, HEAD") }
        return HTTPFaceResponse(status: error.status, headers: headers, body: .bytes(body))
    }

    /// A text body (`/metrics`, `/healthz`).
    static func text(_ text: String, status: HTTPResponseStatus = .ok, contentType: String = "text/plain; charset=utf-8") -> HTTPFaceResponse {
        var body = ByteBuffer()
        body.writeString(text)
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: contentType)
        headers.add(name: "Content-Length", value: "\(body.readableBytes)")
        headers.add(name: "Cache-Control", value: "no-store")
        return HTTPFaceResponse(status: status, headers: headers, body: .bytes(body))
    }

    /// A JSON body (`/readyz`).
    static func json(_ value: JSONValue, status: HTTPResponseStatus) -> HTTPFaceResponse {
        var body = ByteBuffer()
        body.writeJSONValue(value)
        body.writeStaticString("\n")
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "application/json")
        headers.add(name: "Content-Length", value: "\(body.readableBytes)")
        headers.add(name: "Cache-Control", value: "no-store")
        return HTTPFaceResponse(status: status, headers: headers, body: .bytes(body))
    }

    /// `error` as bytes on the wire, with `Connection: close`: for a connection no HTTP handler
    /// answers (refused over a cap, or timed out before its head was whole).
    static func raw(_ error: HTTPFaceError) -> ByteBuffer {
        let response = Self.error(error)
        var out = ByteBuffer()
        out.writeString("HTTP/1.1 \(error.status.code) \(error.status.reasonPhrase)\r\n")
        for (name, value) in response.headers { out.writeString("\(name): \(value)\r\n") }
        out.writeString("Connection: close\r\n\r\n")
        if case .bytes(var body) = response.body { out.writeBuffer(&body) }
        return out
    }
}
