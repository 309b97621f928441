import ImgdCore

extension DownloadPolicy {
    /// The tier a request for `target` goes through: ``tier``, except for a host whose table sets
    /// request headers (`headers`, or the `headers-file`'s), which is always asked directly.
    ///
    /// A shared tier caches by URL alone and serves its copy to anyone who can reach it, so a
    /// response that depended on a per-host header (an `X-Api-Key`, a `PRIVATE-TOKEN`, a
    /// signature header) must never be in it: the tier cannot know which of the headers are
    /// secrets. Sent directly, the headers never leave imgd for the tier at all.
    public func tierRoute(for target: ImageURL) -> TierRoute? {
        guard let tier else { return nil }
        if let rule = hosts.rule(for: target.host), !rule.headers.isEmpty { return nil }
        return tier
    }
}
