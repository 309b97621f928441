/// How one URL's key came about under a ``CacheKeyPolicy``, for `explain`: the host pattern
/// whose `key-ignore-query` applied, the parameters it dropped, and the URL that was hashed.
public struct KeyDerivation: Sendable, Equatable {
    /// The key.
    public let key: CacheKey
    /// What was hashed into ``key``: the normalised URL less its ignored parameters.
    public let keyedURL: String
    /// The host pattern whose rule applied (`*.cdn.example`), nil when no rule names the host.
    public let hostPattern: String?
    /// The rule's `key-ignore-query` patterns (`X-Amz-*`), empty without a rule.
    public let ignoredPatterns: [String]
    /// The names of the URL's parameters left out of the key, in the URL's order.
    public let droppedParameters: [String]
}

extension CacheKeyPolicy {
    /// How `url`'s key is derived under this policy: the same key as ``key(for:)``, and why.
    public func derivation(for url: ImageURL) -> KeyDerivation {
        let keyed = keyedURL(of: url)
        let rule = rules.first { $0.hosts.matches(url.host, port: url.port) }
        var dropped: [String] = []
        if let rule, !rule.ignoredQuery.isEmpty, let mark = url.normalized.firstIndex(of: "?") {
            for parameter in url.normalized[url.normalized.index(after: mark)...].split(separator: "&") {
                let name = parameter.prefix { $0 != "=" }
                if rule.ignoredQuery.contains(where: { $0.matches(name.utf8) }) { dropped.append(String(name)) }
            }
        }
        return KeyDerivation(
            key: key(for: url), keyedURL: keyed, hostPattern: rule.map { $0.hosts.description },
            ignoredPatterns: rule?.ignoredQuery.map(\.description) ?? [], droppedParameters: dropped)
    }
}
