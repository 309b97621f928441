import ImgdCore

/// Per-host settings of the downloader, from the configuration's `[host."PATTERN"]` tables:
/// a cap on transfers at once, request headers, and a request rate (politeness).
///
/// A `host:port` takes the rule of the most specific pattern that names it (an exact host, then
/// the longest wildcard; of the same host, the pattern naming the port before the one naming
/// none); rules do not combine, and a host no rule names takes the policy's defaults. A pattern
/// without a port names every port of its hosts: its cap and rate apply to each.
public struct HostRules: Sendable, Equatable {
    /// One pattern's settings.
    public struct Rule: Sendable, Equatable {
        public let hosts: HostPattern
        /// Transfers at once to one `host:port` of these hosts, instead of
        /// ``DownloadPolicy/maxPerHost``.
        public var maxPerHost: Int?
        /// Headers sent with requests to these hosts, and only to them (``headers(for:)``): over
        /// https to the pattern's port (443 when it names none), and over http only with
        /// ``headersOverHTTP``. A redirect to another host, port or scheme is a request of its
        /// own and carries them only if they would go to its URL.
        public var headers: [RequestHeader] = []
        /// Whether ``headers`` also go over plain http (to the pattern's port, 80 when it names
        /// none): off by default, since they are often credentials.
        public var headersOverHTTP = false
        /// The least time between two requests started to one `host:port`: a token bucket with a
        /// burst of one request.
        public var requestInterval: Duration?
        /// Hosts that serve every URL of these hosts too (same scheme, path and query; the
        /// URL's port unless the mirror names one), tried in order after the URL and the
        /// item's own mirrors when it fails in a way a mirror can cure.
        public var mirrors: [MirrorHost] = []

        public init(hosts: HostPattern) {
            self.hosts = hosts
        }

        /// The headers a request for `url` carries: ``headers`` when `url` is https, or http
        /// with ``headersOverHTTP``, and its port is the one the pattern names (without one,
        /// the scheme's default: 443, or 80); none otherwise. So an https → http redirect to
        /// the same host drops them, as libcurl drops credentials on a scheme or port change.
        public func headers(for url: ImageURL) -> [RequestHeader] {
            guard !headers.isEmpty, hosts.matches(url.host) else { return [] }
            switch url.scheme {
            case "https": return url.port == (hosts.port ?? 443) ? headers : []
            case "http": return headersOverHTTP && url.port == (hosts.port ?? 80) ? headers : []
            default: return []
            }
        }
    }

    /// The rules, most specific first.
    public let rules: [Rule]

    /// No rule.
    public static let none = HostRules(rules: [])

    public init(rules: [Rule]) {
        self.rules = rules.enumerated().sorted {
            ($0.element.hosts.specificity, -$0.offset) > ($1.element.hosts.specificity, -$1.offset)
        }.map(\.element)
    }

    /// The rule for `host` (lower-cased, as ``ImageURL/host``) on `port`, if a pattern names
    /// it; a nil `port` is named only by patterns without one.
    public func rule(for host: String, port: Int? = nil) -> Rule? {
        guard !rules.isEmpty else { return nil }
        return rules.first { $0.hosts.matches(host, port: port) }
    }

    /// The rule for `url`'s `host:port`, if a pattern names it.
    public func rule(for url: ImageURL) -> Rule? {
        rule(for: url.host, port: url.port)
    }

    /// `url` on each mirror host of its rule, in the rule's order (none without one).
    public func mirrors(for url: ImageURL) -> [ImageURL] {
        guard let mirrors = rule(for: url)?.mirrors, !mirrors.isEmpty else { return [] }
        return mirrors.compactMap { url.onMirror($0) }
    }

    /// The configured headers a request for `url` carries (``Rule/headers(for:)``).
    public func headers(for url: ImageURL) -> [RequestHeader] {
        rule(for: url)?.headers(for: url) ?? []
    }
}

/// A request header set by configuration. Its value may be a secret (a bearer token): it is
/// never logged and never shown by `status`; ``description`` gives the name only.
public struct RequestHeader: Sendable, Equatable, CustomStringConvertible {
    public let name: String
    public let value: String

    /// Headers imgd sets or relies on itself, which a table may not replace: the framing and the
    /// connection are libcurl's, revalidation's validators are imgd's, and images are fetched
    /// without content coding on purpose (a decompression bomb cannot hide in one).
    public static let reserved: Set<String> = [
        "host", "content-length", "transfer-encoding", "connection", "upgrade", "te", "trailer", "keep-alive",
        "proxy-connection", "range", "if-range", "if-none-match", "if-modified-since", "if-match", "if-unmodified-since",
        "accept-encoding", "expect",
    ]

    /// The longest value accepted.
    public static let maximumValueBytes = 8192

    /// Checks `name` (an HTTP token, not one of ``reserved``) and `value` (no CR, LF or NUL, at
    /// most ``maximumValueBytes``); the error never quotes the value.
    public init(name: String, value: String) throws(RequestHeaderError) {
        let tokenPunctuation = Set("!#$%&'*+-.^_`|~".utf8)
        guard !name.isEmpty,
            name.utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x41...0x5A).contains($0) || (0x61...0x7A).contains($0) || tokenPunctuation.contains($0) })
        else {
            throw RequestHeaderError(name: name, reason: "is not an HTTP header name (letters, digits and !#$%&'*+-.^_`|~)")
        }
        guard !Self.reserved.contains(name.lowercased()) else {
            throw RequestHeaderError(name: name, reason: "is set by imgd or libcurl and cannot be configured")
        }
        guard value.utf8.count <= Self.maximumValueBytes else {
            throw RequestHeaderError(name: name, reason: "has a value longer than \(Self.maximumValueBytes) bytes")
        }
        guard !value.utf8.contains(where: { $0 == 0x0D || $0 == 0x0A || $0 == 0 }) else {
            throw RequestHeaderError(name: name, reason: "has a value holding a line break or NUL")
        }
        self.name = name
        self.value = value
    }

    /// `Name: value`, as libcurl takes it.
    public var line: String { "\(name): \(value)" }

    public var description: String { name }
}

/// Why a configured header cannot be sent; names the header, never its value.
public struct RequestHeaderError: Error, Sendable, Equatable, CustomStringConvertible {
    public let name: String
    public let reason: String

    public init(name: String, reason: String) {
        self.name = name
        self.reason = reason
    }

    public var description: String { "header \(EchoedText.cut(name, limit: 100)) \(reason)" }
}
