import ImgdCore
import NIOHTTP1

/// A request the HTTP face answers with an error status: the status, the protocol's
/// `snake_case` code (sent as `X-Imgd-Error` and in the JSON body) and a message for a person.
/// The mapping from the control protocol's codes to statuses is written here and nowhere else
/// (Protocol.md, *HTTP face*).
struct HTTPFaceError: Error, Sendable, Equatable {
    let status: HTTPResponseStatus
    let code: String
    let message: String
    /// Seconds for `Retry-After` (503s).
    var retryAfter: Int?

    init(_ status: HTTPResponseStatus, code: String, message: String, retryAfter: Int? = nil) {
        self.status = status
        self.code = code
        self.message = message
        self.retryAfter = retryAfter
    }

    /// 400 `bad_request`: a request the face cannot read (a target that is not a path, a
    /// repeated parameter, a bad percent escape).
    static func badRequest(_ message: String) -> Self { Self(.badRequest, code: "bad_request", message: message) }

    /// 400 `bad_url`: the URL asked for is not an http(s) URL imgd can fetch.
    static func badURL(_ message: String) -> Self { Self(.badRequest, code: FailureCode.badURL.rawValue, message: message) }

    /// 404 `not_found`: no such route, or an image not cached with `fetch=0`.
    static func notFound(_ message: String) -> Self { Self(.notFound, code: "not_found", message: message) }

    /// 405: only GET and HEAD are served.
    static func methodNotAllowed(_ method: String) -> Self {
        Self(.methodNotAllowed, code: "method_not_allowed", message: "\(method) is not served: only GET and HEAD")
    }

    /// 403 `policy_denied`: a request a browser made on behalf of a web page (`Origin`,
    /// `Sec-Fetch-Site`), or with a `Host` that is not this machine (DNS rebinding).
    static func crossSite(_ message: String) -> Self { Self(.forbidden, code: FailureCode.policyDenied.rawValue, message: message) }

    /// 413: a GET or HEAD with a body (none is read).
    static let bodyNotAllowed = Self(
        .payloadTooLarge, code: "request_body", message: "a GET or HEAD request must not carry a body; none is read")

    /// 431: the request head is over `http-header-bytes`.
    static func headersTooLarge(limit: Int) -> Self {
        Self(
            .requestHeaderFieldsTooLarge, code: "headers_too_large",
            message: "the request head is over \(limit) bytes (http-header-bytes, the URL included)")
    }

    /// 408: the request head did not arrive whole within `http-header-timeout`.
    static func headerTimeout(_ timeout: Duration) -> Self {
        Self(
            .requestTimeout, code: "request_timeout",
            message: "the request head did not arrive within \(timeout.components.seconds) s (http-header-timeout)")
    }

    /// 416: a `Range` outside the image.
    static func rangeNotSatisfiable(size: Int) -> Self {
        Self(.rangeNotSatisfiable, code: "range_not_satisfiable", message: "the range is outside the image's \(size) bytes")
    }

    /// The status of a `get` that failed with `error` on the control path.
    init(_ error: ControlError) {
        let status: HTTPResponseStatus
        var retryAfter: Int?
        switch error {
        case .badRequest: status = .badRequest
        case .invalidArgument: status = .badRequest
        case .notFound: status = .notFound
        case .forbidden: status = .forbidden
        case .busy, .busyPerPeer, .busyReserved, .shuttingDown, .queueFull, .queueShareFull, .tooManyRequests,
            .stateUnavailable, .notReady:
            status = .serviceUnavailable
            retryAfter = 1
        case .dataTooLarge: status = .payloadTooLarge
        case .lineTooLong: status = .requestHeaderFieldsTooLarge
        case .unknownCommand: status = .internalServerError
        case .other(let code, _): status = Self.status(ofFailure: code)
        }
        self.init(status, code: error.code, message: error.message, retryAfter: retryAfter)
    }

    /// A download's failure code as a status: the origin's fault is a bad gateway (`http_404`
    /// included: imgd is the gateway, and the code says what the origin answered), its
    /// slowness a gateway timeout; imgd's own refusals and faults keep their meaning.
    static func status(ofFailure code: String) -> HTTPResponseStatus {
        switch FailureCode(rawValue: code) {
        case .policyDenied: return .forbidden
        case .tooLarge: return .payloadTooLarge
        case .timeout: return .gatewayTimeout
        case .badURL: return .badRequest
        case .diskFull, .quotaExceeded: return .insufficientStorage
        case .disk: return .internalServerError
        case .cancelled: return .serviceUnavailable
        // The URL asked for is no longer valid; asking again will not help, a re-signed one will.
        case .urlExpired: return .gone
        case .dns, .connect, .tls, .network, .http, .tooManyRedirects, .truncated, .notImage, .corrupt,
            .checksumMismatch, .notCacheable, .badList:
            return .badGateway
        case nil:
            if code.hasPrefix("http_") { return .badGateway }
            if code == "busy" { return .serviceUnavailable }
            return .internalServerError
        }
    }
}
