import ImgdCore

/// What the engine knows of one key and its host, copied on the engine's thread in one hop
/// (``Downloader/explain(_:url:)``) for `explain`: nothing in it walks the queue. Instants are
/// milliseconds since the epoch.
public struct EngineExplanation: Sendable {
    /// The key's job, when one is under way.
    public struct Download: Sendable {
        /// `queued`, `running`, `publishing`, `waiting_retry` or `waiting_for_space`.
        public let state: String
        /// `on_demand` or `prefetch`.
        public let priority: String
        /// Whether it is a revalidation (a conditional request for a cached entry).
        public let revalidation: Bool
        /// Requests waiting for it.
        public let waiters: Int
        /// Attempts started so far.
        public let attempts: Int
        /// Times it gave its slot away (to an on-demand request, or a list's fair share).
        public let preemptions: Int
        /// When the request reached the engine.
        public let since: Int
        /// When its next attempt may start, while waiting for a retry.
        public let retryAt: Int?
        /// The running request: bytes so far, the length its response declared, when it began,
        /// whether it goes through the tier, and whether it is paused for `max-rate` or room.
        public let bytesReceived: Int?
        public let declaredBytes: Int?
        public let runningSince: Int?
        public let viaTier: Bool?
        public let throttled: Bool
        public let waitingForRoom: Bool
        /// A redirect's hop waiting for its target's host: that `host:port`.
        public let pendingHopHost: String?
    }

    /// One `host:port`, as the engine holds it: what runs, what waits, what holds it back.
    public struct Host: Sendable {
        public let hostKey: String
        /// Requests to it running now, and its cap (its table's `max-per-host`, else the policy's).
        public let running: Int
        public let cap: Int
        /// Jobs queued whose next request goes to it.
        public let queued: Int
        /// Its table's `rate`, as the least time between two requests.
        public let rateIntervalMilliseconds: Int?
        /// Held until then, and by what: `retry_after` or `rate`.
        public let heldUntil: Int?
        public let heldBy: String?
        /// The host table's pattern that applies to it.
        public let rulePattern: String?
        /// Whether requests to it carry configured headers (never which, nor their values).
        public let sendsHeaders: Bool
    }

    public let download: Download?
    /// The failure remembered for the key: its error, and until when.
    public let failure: (error: DownloadError, until: Int)?
    public let host: Host
    /// Jobs queued in all, running in all, and the global cap.
    public let queued: Int
    public let running: Int
    public let maxParallel: Int
    /// Why the address policy refuses the URL's host (a literal address): the range and how it
    /// matched. Nil for an allowed address and for a name (checked at each connect).
    public let addressRefusal: AddressPolicy.Refusal?
    /// Whether the URL's host is a literal address (else a name, resolved at connect).
    public let hostIsAddress: Bool
    /// The tier's URL for the request, when it goes through the tier.
    public let tierURL: String?
    /// Why it does not, when a tier is configured: `host_headers` or `user_info`.
    public let tierBypass: String?
    /// The key's last outcomes, oldest first (``OutcomeHistory``).
    public let outcomes: [OutcomeRecord]
    /// False when the engine had stopped: the rest is empty.
    public let engineRunning: Bool

    /// The answer of an engine that has stopped: it knows nothing any more (touches no state).
    static func engineStopped(_ url: ImageURL) -> EngineExplanation {
        EngineExplanation(
            download: nil, failure: nil,
            host: Host(
                hostKey: url.hostKey, running: 0, cap: 0, queued: 0, rateIntervalMilliseconds: nil, heldUntil: nil, heldBy: nil,
                rulePattern: nil, sendsHeaders: false),
            queued: 0, running: 0, maxParallel: 0, addressRefusal: nil, hostIsAddress: false, tierURL: nil, tierBypass: nil,
            outcomes: [], engineRunning: false)
    }
}
