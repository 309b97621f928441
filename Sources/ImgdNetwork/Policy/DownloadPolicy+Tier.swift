import ImgdCore

extension DownloadPolicy {
    /// The tier a request for `target` goes through: ``tier``, except for a request that carries
    /// configured headers (a table's `headers`, or the `headers-file`'s, for its host, scheme and
    /// port: ``HostRules/headers(for:)``), which is always asked directly.
    ///
    /// A shared tier caches by URL alone and serves its copy to anyone who can reach it, so a
    /// response that depended on a per-host header (an `X-Api-Key`, a `PRIVATE-TOKEN`, a
    /// signature header) must never be in it: the tier cannot know which of the headers are
    /// secrets. Sent directly, the headers never leave imgd for the tier at all.
    public func tierRoute(for target: ImageURL) -> TierRoute? {
        guard let tier else { return nil }
        if !hosts.headers(for: target).isEmpty { return nil }
        return tier
    }
}
