import ImgdCore

/// Everything that limits or shapes a download. Every field has a default, stated here and in
/// docs/settings.md; all of them can be changed by configuration.
public struct DownloadPolicy: Sendable, Equatable {
    /// Transfers running at once, in all (default 8).
    public var maxParallel: Int = 8
    /// Transfers running at once to one `host:port` (default 4).
    public var maxPerHost: Int = 4
    /// Time allowed to connect, TLS included (default 10 s).
    public var connectTimeout: Duration = .seconds(10)
    /// A transfer slower than this many bytes a second… (default 1 KiB/s)
    public var lowSpeedLimit: Int = 1024
    /// …for this long is abandoned as stalled (default 30 s).
    public var lowSpeedTime: Duration = .seconds(30)
    /// Time allowed for one whole attempt (default 120 s).
    public var totalTimeout: Duration = .seconds(120)
    /// Redirects followed (default 5).
    public var maxRedirects: Int = 5
    /// Largest body accepted, counted as it arrives (default 64 MiB).
    public var maxBodyBytes: Int = 64 << 20
    /// Largest image accepted, in pixels declared by its header (default 100 megapixels).
    public var maxPixels: Int = 100_000_000
    /// Proxy URL; nil means none, and proxies from the environment are never used silently.
    /// Through a proxy, ``addresses`` applies to URLs whose host is a literal address; host names
    /// are resolved by the proxy, and what they resolve to is its responsibility.
    public var proxy: String?
    /// A shared cache tier every http(s) fetch goes through, falling back to the origin when the
    /// tier fails (``TierRoute``); nil (the default) fetches from the origins directly. With a
    /// ``proxy`` too, requests to the tier go through the proxy as every other request does.
    public var tier: TierRoute?
    /// A file of PEM certificates trusted for https instead of the system's store (a private
    /// CA); nil (the default) uses the system trust store.
    public var caFile: String?
    /// `User-Agent` header.
    public var userAgent: String = "imgd/\(ImgdVersion.string)"
    /// Peer addresses refused (default ``AddressPolicy/default``).
    public var addresses: AddressPolicy = .default
    /// Retries of transient failures.
    public var retry = RetryPolicy()
    /// How long a failed URL is remembered and answered from memory (default 10 min).
    public var failureMemory: Duration = .seconds(600)
    /// Failed URLs remembered at most; past it the oldest are forgotten (default 100,000: about
    /// 30 MiB with URLs of 200 bytes). Whoever may `add` could otherwise fill the memory with
    /// distinct failing URLs for ``failureMemory``.
    public var maxRememberedFailures = 100_000
    /// How long a list's transfer may hold a slot beyond its fair share while another list
    /// waits, before it is preempted: put back at the front of its list, not failed (default 10 s).
    public var fairShareGrace: Duration = .seconds(10)
    /// Revalidations of due entries queued or running at once (default 10,000): past it, a due
    /// entry is served without one, and is revalidated at a later use. Clients decide which
    /// entries are used, so this queue needs its own bound (`max-queued` counts only requests
    /// a client waits for or added).
    public var maxPendingRevalidations = 10_000
    /// Per-host caps, headers and request rates (none by default).
    public var hosts = HostRules.none
    /// Bytes a second received over every transfer the cap applies to (``maxRateAppliesTo``),
    /// held by a token bucket on the engine's thread; nil (the default) is no cap. A change
    /// applies at once, to running transfers too.
    public var maxRate: Int?
    /// Which transfers ``maxRate`` holds back (default ``RateCapScope/prefetch``: on-demand
    /// `get`s are exempt).
    public var maxRateAppliesTo = RateCapScope.prefetch

    public init() {}
}
