/// How an image's URL becomes its cache key when some of its query is not part of its identity.
///
/// Signed URLs (S3's `X-Amz-Signature`, CloudFront's `Signature`/`Expires`/`Key-Pair-Id`, GCS's
/// `X-Goog-*`) carry a fresh signature and expiry each time a list is made: the key of such a
/// URL must leave them out, or every list fetches every image again under a new name. Per host
/// pattern (the `key-ignore-query` of a `[host."…"]` table), the named parameters are dropped
/// from the normalised URL before it is hashed; the full URL is still what is fetched.
///
/// A URL that loses no parameter keeps ``ImageURL/cacheKey``, so existing caches stay valid.
/// When several patterns match a host, the most specific one applies (an exact host, then the
/// longest wildcard; of the same host, the pattern naming the URL's port); tables do not combine.
public struct CacheKeyPolicy: Sendable, Equatable {
    /// One host pattern's rule.
    public struct Rule: Sendable, Equatable {
        public let hosts: HostPattern
        public let ignoredQuery: [QueryNamePattern]

        public init(hosts: HostPattern, ignoredQuery: [QueryNamePattern]) {
            self.hosts = hosts
            self.ignoredQuery = ignoredQuery
        }
    }

    /// The rules, most specific pattern first.
    public let rules: [Rule]

    /// No rule: every key is the hash of the whole URL.
    public static let wholeURL = CacheKeyPolicy(rules: [])

    public init(rules: [Rule]) {
        self.rules = rules.enumerated().sorted {
            ($0.element.hosts.specificity, -$0.offset) > ($1.element.hosts.specificity, -$1.offset)
        }.map(\.element)
    }

    /// The URL that is hashed into `url`'s key: `url` without the parameters its host's rule
    /// ignores (its `?` too, when none is left).
    public func keyedURL(of url: ImageURL) -> String {
        guard let rule = rules.first(where: { $0.hosts.matches(url.host, port: url.port) }), !rule.ignoredQuery.isEmpty else {
            return url.normalized
        }
        let text = url.normalized
        guard let mark = text.utf8.firstIndex(of: UInt8(ascii: "?")) else { return text }
        let query = text.utf8[text.utf8.index(after: mark)...]
        var kept: [Substring.UTF8View.SubSequence] = []
        var dropped = false
        for parameter in query.split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: false) {
            let name = parameter.prefix { $0 != UInt8(ascii: "=") }
            if rule.ignoredQuery.contains(where: { $0.matches(name) }) {
                dropped = true
            } else {
                kept.append(Substring(parameter).utf8)
            }
        }
        guard dropped else { return text }
        let base = String(text.utf8[..<mark])!
        guard !kept.isEmpty else { return base }
        return base + "?" + kept.map { String(Substring($0)) }.joined(separator: "&")
    }

    /// `url`'s cache key under this policy.
    public func key(for url: ImageURL) -> CacheKey {
        let keyed = keyedURL(of: url)
        return keyed == url.normalized ? url.cacheKey : CacheKey(normalizedURL: keyed)
    }
}
