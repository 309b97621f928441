import CCurlShim
import ImgdCore

/// A shared cache tier that fetches origin URLs for imgd (`contrib/fleet/`): every http(s)
/// request goes to `<tier>/<scheme>/<host>[:port]<path>[?query]`, and the tier fetches
/// `<scheme>://<host>[:port]<path>[?query]` from the origin, caching it under that URL. Only the
/// transport changes: keys, reports and the index keep the origin URL.
///
/// The tier is trusted as a proxy is: the connection to it is checked against the address
/// policy like any peer, and the origin's host *names* are resolved by the tier (literal hosts
/// and redirect targets are still checked by imgd before they are sent).
public struct TierRoute: Sendable, Equatable {
    /// The tier's URL without a trailing slash (`http://cache.site:8080`, or with a path prefix).
    public let base: String
    /// Whether a tier failure (no answer from the tier, or a 5xx it marks with `X-Tier-Error`)
    /// falls back to the origin within the same attempt (default ``defaultFallback``); when
    /// false it is an ordinary failure, retried as such.
    public var fallback: Bool
    /// Falling back is on by default: a tier outage then costs only the hop.
    public static let defaultFallback = true

    /// Checks `text`: an absolute http or https URL with a host, and without user info, query or
    /// fragment.
    public init(_ text: String, fallback: Bool = defaultFallback) throws(TierRouteError) {
        let parsed: CurlURL.Parsed
        switch CurlURL.Parsed.parse(text) {
        case .success(let url): parsed = url
        case .failure(let failure): throw .invalid(text, reason: failure.reason)
        }
        let part = parsed.part
        let scheme = part(CURLUPART_SCHEME)?.lowercased() ?? ""
        guard scheme == "http" || scheme == "https" else { throw .invalid(text, reason: "only an http or https URL can name a tier") }
        guard part(CURLUPART_HOST)?.isEmpty == false else { throw .invalid(text, reason: "no host") }
        guard part(CURLUPART_USER) == nil, part(CURLUPART_QUERY) == nil, part(CURLUPART_FRAGMENT) == nil else {
            throw .invalid(text, reason: "a tier URL has no user info, query or fragment")
        }
        guard let whole = part(CURLUPART_URL) else { throw .invalid(text, reason: "libcurl could not rebuild it") }
        var base = whole
        while base.hasSuffix("/") { base.removeLast() }
        self.base = base
        self.fallback = fallback
    }

    /// The tier URL for `url` (normalized: lower-case host, no default port, no fragment, as the
    /// tier's cache key wants it), or nil for a URL the tier cannot name — one with user info,
    /// which is fetched from its origin directly.
    public func requestURL(for url: ImageURL) -> String? {
        let rest = url.normalized.dropFirst(url.scheme.count + 3)
        let authority = rest.prefix { $0 != "/" && $0 != "?" }
        guard !authority.contains("@") else { return nil }
        let pathAndQuery = rest.dropFirst(authority.count)
        return base + "/" + url.scheme + "/" + authority + (pathAndQuery.hasPrefix("/") ? "" : "/") + pathAndQuery
    }
}

/// Why a `tier` setting is not usable.
public enum TierRouteError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Not an http(s) URL of a host (with the reason).
    case invalid(String, reason: String)

    public var description: String {
        switch self {
        case .invalid(let text, let reason): "\(EchoedText.cut(text, limit: 200)) is not a tier URL: \(reason)"
        }
    }
}
