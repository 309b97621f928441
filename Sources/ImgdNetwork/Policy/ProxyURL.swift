import CCurlShim
import ImgdCore

/// The `proxy` setting, checked before it is handed to libcurl (`CURLOPT_PROXY`).
///
/// imgd's address policy sees a host *name* only where the name is resolved. Through a proxy that
/// resolves names itself (`http://`, `https://`, `socks4a://`, `socks5h://`) the proxy is the
/// place to deny addresses. `socks4://`, `socks://` and `socks5://` resolve on imgd's host and hand
/// the proxy an address that imgd never checks (the only socket imgd opens goes to the proxy), so
/// a name resolving to 169.254.169.254 would be fetched: those schemes are refused, naming the one
/// to use instead. A proxy without a scheme is read as libcurl reads it (an HTTP proxy, unless the
/// name starts like `ftp.`, whose guessed scheme no proxy speaks: refused too).
///
/// Errors name the scheme, never the whole URL: it may carry the proxy's password.
public enum ProxyURL {
    /// Schemes whose proxy resolves the target's name, lower-case.
    public static let allowedSchemes: Set<String> = ["http", "https", "socks4a", "socks5h"]

    /// The schemes that resolve on imgd's host, each with the one that resolves at the proxy.
    public static let locallyResolving: [String: String] = ["socks4": "socks4a", "socks": "socks4a", "socks5": "socks5h"]

    /// Checks `text` and returns it unchanged: a URL of a host whose scheme (given, or as libcurl
    /// guesses it) is one of ``allowedSchemes``.
    public static func check(_ text: String) throws(ProxyURLError) -> String {
        // The flags libcurl's own proxy parser uses (url.c, parse_proxy): made-up schemes such as
        // socks5h are allowed, and a missing scheme is guessed.
        let parsed: CurlURL.Parsed
        switch CurlURL.Parsed.parse(text, flags: UInt32(CURLU_NON_SUPPORT_SCHEME | CURLU_GUESS_SCHEME)) {
        case .success(let url): parsed = url
        case .failure(let failure): throw .invalid(reason: failure.reason)
        }
        let part = parsed.part
        let scheme = part(CURLUPART_SCHEME)?.lowercased() ?? ""
        if let instead = locallyResolving[scheme] { throw .resolvesLocally(scheme: scheme, instead: instead) }
        guard allowedSchemes.contains(scheme) else { throw .unsupportedScheme(EchoedText.cut(scheme, limit: 32)) }
        guard part(CURLUPART_HOST)?.isEmpty == false else { throw .invalid(reason: "no host") }
        return text
    }

    /// `text` with its user name and password, if any, replaced by `…`: how a proxy URL is
    /// shown in the log (a reload's "proxy changed to …").
    public static func redacted(_ text: String) -> String {
        let authorityStart = text.firstRange(of: "://")?.upperBound ?? text.startIndex
        let authorityEnd = text[authorityStart...].firstIndex { "/?#".contains($0) } ?? text.endIndex
        guard let at = text[authorityStart..<authorityEnd].lastIndex(of: "@") else { return text }
        return String(text[..<authorityStart]) + "…" + String(text[at...])
    }
}

/// Why a `proxy` setting is refused. Never quotes the URL (it may hold a password).
public enum ProxyURLError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A SOCKS scheme that resolves names on imgd's host, with the scheme to use instead.
    case resolvesLocally(scheme: String, instead: String)
    /// A scheme no proxy speaks (or that libcurl guessed from a name without one).
    case unsupportedScheme(String)
    /// Not a URL of a host.
    case invalid(reason: String)

    public var description: String {
        switch self {
        case .resolvesLocally(let scheme, let instead):
            "\(scheme):// proxies get addresses that imgd resolves and cannot check against the denied ranges: use \(instead):// (the proxy resolves host names; deny addresses there)"
        case .unsupportedScheme(let scheme):
            "the scheme \(scheme) is not a proxy's (http, https, socks4a or socks5h; write http:// before a name libcurl would read as another scheme)"
        case .invalid(let reason):
            "not a proxy URL: \(reason)"
        }
    }
}
