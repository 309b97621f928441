/// Why a URL was not cached, as the stable `snake_case` code that summaries, list reports, events
/// and the control protocol carry (Protocol.md, *Error codes*). Every code is written here and
/// nowhere else; an HTTP status failure adds its status to ``http`` (`http_404`).
public enum FailureCode: String, Sendable, CaseIterable {
    /// The name did not resolve.
    case dns
    /// No TCP connection could be made (refused, unreachable, connect timeout).
    case connect
    /// The TLS handshake or certificate check failed.
    case tls
    /// The whole attempt, or a stall below the low-speed limit, ran out of time.
    case timeout
    /// The connection broke before any response arrived (reset, empty reply, malformed HTTP).
    case network
    /// The server answered a status other than 2xx; written with the status, see ``http(status:)``.
    case http
    /// More redirects than allowed (a loop, usually).
    case tooManyRedirects = "too_many_redirects"
    /// The body, or the image's declared pixel count, is over the limit.
    case tooLarge = "too_large"
    /// The body is not an image imgd recognises.
    case notImage = "not_image"
    /// The body ended early.
    case truncated
    /// The body arrived whole but is damaged.
    case corrupt
    /// The address or protocol is refused by policy.
    case policyDenied = "policy_denied"
    /// Cancelled by a caller, or with its list.
    case cancelled
    /// The cache folder could not take the file (full disk, permissions), or lost it again.
    case disk
    /// The body does not fit under the cache's size limit, even after evicting what may be evicted.
    case diskFull = "disk_full"
    /// The body's SHA-256 is not the one the list or request named (after one more try).
    case checksumMismatch = "checksum_mismatch"
    /// The response forbids storing it (`Cache-Control: no-store`); not retried.
    case notCacheable = "not_cacheable"
    /// A line of a link list is not a URL imgd fetches.
    case badURL = "bad_url"
    /// A link list that cannot be read or is refused whole.
    case badList = "bad_list"
    /// A signed URL past the expiry its query states (``URLExpiry``): not requested (or its
    /// origin's 403 came after that expiry), not retried, not remembered against its key. Re-sign
    /// it and ask again.
    case urlExpired = "url_expired"
    /// The body is larger than what the uid it is charged to may hold (quotas per user); not
    /// retried, not remembered.
    case quotaExceeded = "quota_exceeded"

    /// The code of an HTTP status failure: `http_404`.
    public static func http(status: Int) -> String { "\(http.rawValue)_\(status)" }
}
