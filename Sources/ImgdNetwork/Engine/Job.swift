import ImgdCore

/// One URL being fetched for one or more waiters: the unit that is queued, run, retried and
/// finished. Coalescing happens here: a second request for the same key joins the job.
/// Engine-thread only.
final class Job {
    enum State {
        /// In the transfer queue.
        case queued
        /// A transfer is running.
        case running
        /// Its body arrived and is being checked and published.
        case publishing
        /// Failed transiently; waiting for its back-off to end.
        case waitingRetry
        /// Its write found the filesystem full; waiting for the cache to evict before it tries
        /// once more.
        case waitingForSpace
        /// Done, for better or worse; its waiters have their result.
        case finished
    }

    /// What it fetches: its first waiter's URL, or (``TransferEngine/refuseIfExpired(_:)``) a
    /// later waiter's of the same key when the first one's signature expired while queued.
    var url: ImageURL
    /// When ``url`` stops working, if its query says (a signed URL's ``URLExpiry``).
    var expiry: URLExpiry?
    let key: CacheKey
    /// The digest the first waiter named, checked by the publisher; a waiter that joined naming
    /// another is answered `checksum_mismatch` if the body has the job's.
    let expectedSHA256: SHA256Digest?
    /// Set for a document (a sitemap the spool reads): its body is kept in memory up to this
    /// many bytes and answered as it is, never checked as an image nor cached.
    let documentLimit: Int?
    /// Set for a revalidation: the cached entry's validators, sent as conditional headers, and a
    /// `304` is its success. Dropped when a request that wants the body joins it while queued.
    var validators: Validators?
    /// The uid a new entry is charged to (quotas per user): the first waiter's caller, the
    /// request that caused the fetch; nil (unowned) for imgd's own requests and callers of no
    /// known uid. A waiter that joins later does not change it.
    let owner: UInt32?
    /// Unique per engine: tells this job from a later one for the same key.
    let serial: UInt64
    var waiters: [FetchToken] = []
    /// The highest priority among its waiters.
    var priority: FetchPriority
    /// The submitter whose turn it runs in: the first waiter's, or, while that one's prefetches
    /// are held (a list outside its calendar window), another waiter's that is not held.
    var submitter: SubmitterID
    var state = State.queued
    /// Attempts started so far.
    var attempts = 0
    /// Times its transfer gave its slot away (to an on-demand request or a waiting list).
    var preemptions = 0
    /// Set once a full filesystem has cost this job an eviction and a retry.
    var retriedForSpace = false
    /// The running transfer, while `state == .running`.
    var transfer: Transfer?
    /// A redirect's next request that waits for its host (at its cap, or held by its `rate` or a
    /// `Retry-After`): the job is queued again, and it starts with this hop instead of its URL.
    var pendingHop: Hop?
    /// The target of the attempt's last request (its URL or a redirect's): the host that
    /// answered, which a `Retry-After` in that answer holds back.
    var lastTarget: ImageURL?
    /// Whether its last request went through the tier (for its ``OutcomeRecord``).
    var viaTier = false
    /// When it reached the engine (for its ``OutcomeRecord`` and `explain`).
    let acceptedAt = ContinuousClock.now
    /// When its next attempt may start, once it waits for a retry (set by `scheduleRetry`).
    var retryAt: ContinuousClock.Instant?
    /// The `host:port` it is counted under in ``TransferEngine/queuedByHost`` while queued.
    var queuedHost: String?

    /// A redirect's request waiting for a slot of its target's host, and what it keeps of its
    /// attempt.
    struct Hop {
        let target: ImageURL
        /// Redirects followed in the attempt before this request.
        let redirects: Int
        /// When the attempt began: the chain shares the attempt's time.
        let attemptStartedAt: ContinuousClock.Instant
        /// When the hop began to wait: time spent waiting for the host is not the attempt's.
        let queuedAt: ContinuousClock.Instant
    }

    /// Other URLs of the image, asked after ``url`` in this order (the first waiter's own, its
    /// host table's, then later waiters' own), without repeats
    /// (``TransferEngine/addSources(of:to:isFirst:)``). Empty for most jobs: no allocation.
    var mirrors: [ImageURL] = []
    /// Which URL the next attempt asks: 0 for ``url``, N for the Nth mirror.
    var sourceIndex = 0
    /// Each URL's last failure, by ``sourceIndex`` (kept only when there are mirrors): a failure
    /// after all of them reports each.
    var sourceFailures: [Int: DownloadError] = [:]
    /// How many URLs the job may ask: ``url`` and its mirrors.
    var sourceCount: Int { 1 + mirrors.count }
    /// The URL at `index`: ``url`` for 0, else that mirror.
    func source(at index: Int) -> ImageURL { index == 0 ? url : mirrors[index - 1] }
    /// The URL the job's next attempt starts with: ``url``, or the mirror whose turn it is.
    var source: ImageURL { sourceIndex == 0 ? url : mirrors[sourceIndex - 1] }

    /// The URL the job's next request goes to: its pending hop's target, else its source. Its host
    /// is the one whose cap and gate decide when the job may start.
    var nextTarget: ImageURL { pendingHop?.target ?? source }

    init(first waiter: FetchToken, serial: UInt64) {
        self.serial = serial
        url = waiter.url
        expiry = URLExpiry(waiter.url)
        key = waiter.key
        expectedSHA256 = waiter.expectedSHA256
        documentLimit = waiter.documentLimit
        validators = waiter.validators
        priority = waiter.priority
        submitter = waiter.submitter
        owner = waiter.caller.flatMap { $0 == .max ? nil : $0 }
        waiters = [waiter]
    }
}
