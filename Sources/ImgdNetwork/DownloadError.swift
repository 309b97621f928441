import ImgdCore

/// Why a URL could not be cached. Each case is one failure class with a stable `snake_case`
/// ``code`` (used in summaries, reports and the control protocol) and a ``message`` for a person.
public enum DownloadError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The name did not resolve.
    case dns(String)
    /// No TCP connection could be made (refused, unreachable, connect timeout).
    case connect(String)
    /// The TLS handshake or certificate check failed.
    case tls(String)
    /// The whole attempt, or a stall below the low-speed limit, ran out of time.
    case timeout(String)
    /// The connection broke after it was made (reset, empty reply, malformed HTTP).
    case network(String)
    /// The server answered a status other than 2xx.
    case http(status: Int, retryAfter: Duration?)
    /// More redirects than allowed (a loop, usually).
    case tooManyRedirects(limit: Int)
    /// The body, or the image's declared pixel count, is over the limit.
    case tooLarge(String)
    /// The body is not an image imgd recognises (an HTML error page served with 200, say).
    case notImage(String)
    /// The body ended early (short of its Content-Length, or its format's end marker is missing).
    case truncated(String)
    /// The body arrived whole but is damaged (a checksum fails, a part every decoder needs is
    /// missing); the server holds a broken file, so fetching it again will not help.
    case corrupt(String)
    /// The address or protocol is refused by policy (a denied range, a redirect to `file://`).
    case policyDenied(String)
    /// Cancelled by a caller.
    case cancelled
    /// The cache folder could not take the file (full disk, permissions). `outOfSpace` is true
    /// for ENOSPC/EDQUOT, which imgd answers by evicting and trying once more.
    case disk(String, outOfSpace: Bool = false)
    /// The body does not fit under the cache's size limit, even after evicting every entry
    /// that may be evicted (the rest is pinned or being written).
    case diskFull(String)
    /// The body's SHA-256 is not the one the request named (a list's `sha256`). Tried once
    /// more, then final; never remembered against the URL, since the next request may name
    /// another digest.
    case checksumMismatch(expected: SHA256Digest, received: SHA256Digest)
    /// The response says `Cache-Control: no-store`: imgd must not keep it. Final, and
    /// remembered like any failure of the URL.
    case notCacheable(String)
    /// A signed URL past the expiry its query states: refused without a request, or its origin
    /// answered `status` (403) at or after that expiry. Final, and never remembered against its
    /// key: the same image under a re-signed URL must be fetched.
    case urlExpired(URLExpiry, status: Int? = nil)
    /// The URL failed, and so did each of its mirrors: the URL's own last failure (whose code
    /// this error has), and each mirror's last one, in the order they were tried.
    indirect case withMirrors(DownloadError, mirrors: [MirrorFailure])
    /// The body is larger than what the uid it would be charged to may hold (its quota less
    /// its pinned bytes): refused before it is published. Final, and never remembered against
    /// the URL (another user may fetch it).
    case quotaExceeded(String)

    /// The failure class, as a stable `snake_case` code: `http_404`, `not_image`, …
    public var code: String {
        switch self {
        case .http(let status, _): FailureCode.http(status: status)
        case .withMirrors(let primary, _): primary.code
        default: failureCode.rawValue
        }
    }

    /// The failure class (``code`` without an HTTP status).
    public var failureCode: FailureCode {
        switch self {
        case .dns: .dns
        case .connect: .connect
        case .tls: .tls
        case .timeout: .timeout
        case .network: .network
        case .http: .http
        case .tooManyRedirects: .tooManyRedirects
        case .tooLarge: .tooLarge
        case .notImage: .notImage
        case .truncated: .truncated
        case .corrupt: .corrupt
        case .policyDenied: .policyDenied
        case .cancelled: .cancelled
        case .disk: .disk
        case .diskFull: .diskFull
        case .checksumMismatch: .checksumMismatch
        case .notCacheable: .notCacheable
        case .urlExpired: .urlExpired
        case .withMirrors(let primary, _): primary.failureCode
        case .quotaExceeded: .quotaExceeded
        }
    }

    /// What happened, for a person.
    public var message: String {
        switch self {
        case .dns(let detail), .connect(let detail), .tls(let detail), .timeout(let detail),
            .network(let detail), .tooLarge(let detail), .notImage(let detail), .truncated(let detail),
            .corrupt(let detail), .policyDenied(let detail), .disk(let detail, _), .diskFull(let detail),
            .notCacheable(let detail), .quotaExceeded(let detail):
            detail
        case .http(let status, let retryAfter):
            "the server answered HTTP \(status)" + (retryAfter.map { " (Retry-After \($0.components.seconds) s)" } ?? "")
        case .tooManyRedirects(let limit): "more than \(limit) redirects"
        case .cancelled: "cancelled"
        case .checksumMismatch(let expected, let received): "the body's SHA-256 is \(received), not the \(expected) asked for"
        case .urlExpired(let expiry, let status?):
            "the server answered HTTP \(status) and the URL expired at \(expiry.iso8601) (its \(expiry.form.rawValue)): re-sign it and ask again"
        case .urlExpired(let expiry, nil):
            "the URL's signature is valid only until \(expiry.iso8601) (its \(expiry.form.rawValue)), so it was not requested: re-sign it and ask again"
        case .withMirrors(let primary, let mirrors):
            primary.message + "; mirrors: " + mirrors.map { "\($0.url): \($0.code): \($0.message)" }.joined(separator: "; ")
        }
    }

    public var description: String { "\(code): \(message)" }

    /// True for failures of this machine rather than of the URL (the disk, the cache's cap, a
    /// cancel): they are never remembered against the URL.
    public var isLocal: Bool {
        switch self {
        case .disk, .diskFull, .cancelled, .quotaExceeded: true
        case .withMirrors(let primary, _): primary.isLocal
        default: false
        }
    }

    /// True for failures worth another attempt: they may pass by themselves.
    /// 404, 410, not_image, corrupt, policy_denied and the like are final.
    var isTransient: Bool {
        switch self {
        case .connect, .timeout, .network, .truncated: true
        case .http(let status, _): [408, 425, 429, 500, 502, 503, 504].contains(status)
        // A checksum mismatch is tried once more by the engine itself (see `settle`), not by
        // the attempts setting: a CDN node serving an old copy may be followed by one that is
        // current, but an origin serving other bytes will not change its mind.
        case .dns, .tls, .tooManyRedirects, .tooLarge, .notImage, .corrupt, .policyDenied, .cancelled, .disk, .diskFull,
            .checksumMismatch, .notCacheable, .urlExpired, .quotaExceeded:
            false
        case .withMirrors(let primary, _): primary.isTransient
        }
    }
}

/// One mirror's last failure, in a ``DownloadError/withMirrors(_:mirrors:)``.
public struct MirrorFailure: Sendable, Equatable {
    /// The mirror's URL (normalised).
    public let url: String
    /// Its failure's code (``DownloadError/code``).
    public let code: String
    /// Its failure's message.
    public let message: String

    public init(url: String, code: String, message: String) {
        self.url = url
        self.code = code
        self.message = message
    }
}
