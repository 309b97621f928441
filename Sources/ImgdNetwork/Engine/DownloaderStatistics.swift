/// Counters (since start) and gauges (now) of the downloader.
public struct DownloaderStatistics: Sendable, Equatable {
    /// Transfers running now.
    public var running = 0
    /// Jobs waiting for a slot now.
    public var queued = 0
    /// Jobs waiting for a retry now.
    public var waitingRetry = 0
    /// Transfer attempts started.
    public var started = 0
    /// Jobs that ended with a cached image.
    public var succeeded = 0
    /// Jobs that ended with a failure (cancelled ones excluded).
    public var failed = 0
    /// Jobs cancelled.
    public var cancelled = 0
    /// Retries scheduled.
    public var retries = 0
    /// Requests that joined a job already under way.
    public var coalesced = 0
    /// Revalidations answered `304 Not Modified`: the entry's freshness renewed, its file untouched.
    public var revalidated = 0
    /// Requests answered from the remembered-failure table (or withdrawn because of it: the
    /// revalidation of a due entry whose failure was told already).
    public var rememberedFailures = 0
    /// Body bytes of published images.
    public var bytesDownloaded = 0
    /// Prefetch transfers that gave their slot to an on-demand request or to a list below its
    /// fair share (put back in the queue, not failed).
    public var preempted = 0
    /// Transfers ended early as timeouts because their pace could not finish the declared body in time.
    public var pacedOut = 0
    /// Requests that went to the origin directly because the tier failed (no answer, or a 5xx
    /// marked as its own).
    public var tierFallbacks = 0
    /// Times a body met the cap and its transfer paused while the cache made room (evicting on
    /// its own queue, never on the transfer thread).
    public var roomRequests = 0
    /// Times a transfer paused because `max-rate`'s bucket was empty.
    public var throttled = 0
    /// Transfers paused for `max-rate` now.
    public var throttledNow = 0
    /// Hosts the engine keeps state for now: those with a transfer running or a back-off
    /// (`Retry-After`) pending; the others are forgotten.
    public var hosts = 0
}
