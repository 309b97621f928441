import CCurlShim
import HeapModule
import ImgdCore
import ImgdStore

#if canImport(Glibc)
import Glibc
#endif

/// The downloader's engine: one thread that owns libcurl's multi handle, every easy handle and
/// socket, the queue of jobs, the coalescing table, per-host state and the remembered failures.
/// Checking and publishing a finished body is the ``BodyPublisher``'s, on its own queue.
///
/// Other threads talk to it only through ``send(_:)`` — a command appended to a locked inbox,
/// then `curl_multi_wakeup` — and hear back through each ``FetchToken``. Because the thread that
/// runs the transfers also decides which start next, a finished transfer's slot is refilled
/// without a thread hop.
///
/// `@unchecked Sendable`: everything mutable below `inbox` is touched only by the loop thread;
/// `inbox` and `statistics` are behind their own mutexes.
///
/// The type is split by facet: this file holds its state, the loop and the commands it takes;
/// `TransferEngine+Scheduling.swift` what runs next (admission, queue order, caps, preemption,
/// retries); `TransferEngine+Completion.swift` how a finished transfer is classified and its job
/// ended; `TransferEngine+Statistics.swift` the counters it publishes.
final class TransferEngine: @unchecked Sendable {
    enum Command {
        case fetch(FetchToken)
        case fetchAll([FetchToken])
        case cancelWait(FetchToken)
        /// Cancels the job for a URL, if there is one; `reply` (when given) is told whether there
        /// was, on the loop thread.
        /// Every request for the key (caller nil), or those asked for one uid.
        case cancelURL(CacheKey, caller: UInt32?, reply: (@Sendable (Bool) -> Void)?)
        case cancelSubmitter(SubmitterID)
        case forgetFailures([CacheKey]?)
        /// A new policy (a reload): transfers that start from now on follow it; running ones finish
        /// under the old one, but for `max-rate`, which holds back their next bytes at the new rate.
        case updatePolicy(DownloadPolicy)
        /// Holds a submitter's queued prefetches (true) or lets them start again (false): a list
        /// outside its calendar window. Its running transfers finish; on-demand jobs never wait.
        case holdSubmitter(SubmitterID, Bool)
        /// Gives a submitter that many turns at the prefetch level for each of the others', and
        /// that many shares of the slots (1: an equal share).
        case weighSubmitter(SubmitterID, Int)
        /// Caps the prefetch transfers running at once below `maxParallel` (the courtesy loop);
        /// nil lifts the cap. On-demand transfers are not counted and never held by it.
        case limitPrefetch(Int?)
        /// Calls back on the loop thread, and does nothing else: the watchdog's round trip.
        case ping(@Sendable () -> Void)
        /// Reports the remembered failures (URL and error) to the callback, on the loop thread.
        case listFailures(@Sendable ([(url: String, error: DownloadError)]) -> Void)
        /// Reports one page of the remembered failures in URL order (after a URL, at most a
        /// number), on the loop thread.
        case listFailurePage(after: String?, limit: Int, reply: @Sendable (RememberedFailurePage) -> Void)
        /// The publisher's verdict on a job's body.
        case published([PublishOutcome])
        /// The cache's answer to a transfer's request for room (``RoomMaker/reserve(_:settlingFirst:reply:)``):
        /// the job, the transfer that asked, and the bytes now reserved for it, or refused.
        case roomAnswered(CacheKey, transferSerial: UInt64, bytes: Int, granted: Bool)
        /// The cache evicted for a job whose write found the filesystem full: it tries again.
        case spaceFreed(CacheKey, jobSerial: UInt64)
        /// What the engine knows of a key and `url`'s host (`explain`), on the loop thread: a
        /// copy of a few fields, never a walk of the queue.
        case explain(CacheKey, url: ImageURL, reply: @Sendable (EngineExplanation) -> Void)
        case stop
    }

    private struct Inbox {
        var commands: [Command] = []
        /// Set by the loop as it stops: no more wakeups may reach the multi handle.
        var isClosed = false
    }

    /// One `host:port` the engine talks to. Every request counts against the host it goes to:
    /// a redirect's hop against its target's, not the job's URL's.
    struct HostState {
        /// Requests to this host running now (each transfer holds one slot of its target's host).
        var running = 0
        /// A `Retry-After` from this host, or its `rate`, holds the requests waiting for it (queued
        /// jobs and redirects' hops) until then.
        var blockedUntil: ContinuousClock.Instant?
        /// What set ``blockedUntil`` last (for `explain`).
        var heldBy: HoldCause?
    }

    /// What holds a host back.
    enum HoldCause: String {
        case retryAfter = "retry_after"
        case rate
    }

    struct RetryEntry: Comparable {
        let readyAt: ContinuousClock.Instant
        let serial: UInt64
        let job: Job
        static func < (lhs: RetryEntry, rhs: RetryEntry) -> Bool {
            (lhs.readyAt, lhs.serial) < (rhs.readyAt, rhs.serial)
        }
        static func == (lhs: RetryEntry, rhs: RetryEntry) -> Bool { lhs.serial == rhs.serial }
    }

    /// Changed only on the loop thread (``Command/updatePolicy(_:)``).
    private(set) var policy: DownloadPolicy
    let cache: CacheDirectory
    let disk: DiskCache
    /// Room under the cap for transfers that outgrow their reservation (the cache's actor).
    let room: RoomMaker
    /// Set once in init (it needs `self` for its wake-up call) and never changed.
    private(set) var publisher: BodyPublisher!
    private let inbox = Locked(Inbox())
    private let waker: CurlWaker
    let statistics = Locked(DownloaderStatistics())
    /// How long transfers took, by outcome: recorded on the engine's thread when a transfer
    /// completes (``complete(easy:result:)``), read by `metrics` on any thread (atomics).
    let transferDurations = TransferDurations()
    /// Set once the loop has stopped and released libcurl.
    private let stopped = Promise<Void>()

    // Loop-thread state. Internal rather than private only so that the facet files reach it.
    private(set) var multi: CurlMulti?
    var jobs: [CacheKey: Job] = [:]
    var queue = TransferQueue<Job>()
    var running: [UnsafeMutableRawPointer: Transfer] = [:]
    var hosts: [String: HostState] = [:]
    var retries = Heap<RetryEntry>()
    /// See ``noteStall(now:)``: set when nothing could start, with when a back-off ends.
    var isQueueStalled = false
    var stallLapsesAt: ContinuousClock.Instant?
    /// Prefetch transfers allowed at once when below `policy.maxParallel` (``Command/limitPrefetch(_:)``); nil: no such cap.
    var prefetchLimit: Int?
    var retrySerial: UInt64 = 0
    /// Jobs in `.waitingRetry` (the heap may also hold entries of jobs cancelled meanwhile).
    private(set) var waitingRetryCount = 0
    /// Jobs whose body is with the publisher.
    private(set) var publishingCount = 0
    /// Jobs waiting for the cache to free space after their write found the filesystem full.
    private(set) var waitingForSpaceCount = 0
    /// The serial of the last transfer started: a transfer's own, so that an answer meant for an
    /// earlier transfer of the same job is never taken for its.
    var lastTransferSerial: UInt64 = 0
    /// Keys whose body is with the publisher, until its outcome comes back, also when the job
    /// was cancelled meanwhile. A new transfer for such a key waits: a body under 64 KiB is
    /// published on the publisher's queue and a larger one on a spill lane, and two bodies of
    /// one key published at once could leave the file of one under the row of the other.
    var publishingKeys = Set<CacheKey>()
    var jobSerial: UInt64 = 0
    var failures: FailureMemory
    /// Each key's last outcomes, for `explain` (written in ``finish(_:_:remember:)``).
    var outcomeHistory = OutcomeHistory()
    /// Jobs queued per `host:port` of their next request, kept by ``move(_:to:)`` (and
    /// ``accept(_:)`` for a new job), so `explain` reads a host's queue without walking it.
    var queuedByHost: [String: Int] = [:]
    private var nextFailureSweep = ContinuousClock.now
    var nextShareCheck = ContinuousClock.now
    var nextPaceCheck = ContinuousClock.now
    /// TLS sessions shared by every transfer's handle (see ``CurlShare``); released after the
    /// multi handle, when no easy handle is left.
    private(set) var share: CurlShare?
    var counters = DownloaderStatistics()
    /// Told of each fallback from the tier to the origin (the tier's URL and the cause), on the
    /// loop thread: keep it short.
    let onTierFallback: (@Sendable (_ tier: String, _ cause: String) -> Void)?
    /// `max-rate`'s bucket and the transfers it holds back, in the order they paused
    /// (`TransferEngine+Bandwidth.swift`).
    var bandwidth: BandwidthBucket
    var throttled: [Transfer] = []

    init(
        policy: DownloadPolicy, cache: DiskCache, onTierFallback: (@Sendable (_ tier: String, _ cause: String) -> Void)? = nil
    ) throws(CurlSetupError) {
        self.onTierFallback = onTierFallback
        guard CurlLibrary.initialize() else { throw CurlSetupError(what: "curl_global_init", code: -1) }
        let multi = try CurlMulti()
        // Our own caps decide what runs; these only keep libcurl's connection pool in proportion.
        multi.set(CURLMOPT_MAX_HOST_CONNECTIONS, Self.hostConnectionLimit(policy))
        multi.set(CURLMOPT_MAXCONNECTS, max(32, policy.maxParallel * 2))
        multi.set(CURLMOPT_PIPELINING, Int(CURLPIPE_MULTIPLEX))
        self.multi = multi
        self.share = try CurlShare()
        self.waker = multi.waker
        self.policy = policy
        bandwidth = BandwidthBucket(rate: policy.maxRate)
        failures = FailureMemory(capacity: policy.maxRememberedFailures)
        self.cache = cache.directory
        self.disk = cache
        self.room = cache.room
        self.publisher = BodyPublisher(
            cache: cache, validator: ImageValidator(maxPixels: policy.maxPixels),
            deliver: { [weak self] outcomes in self?.send(.published(outcomes)) },
            wake: { [weak self] in self?.nudge() })
    }

    /// libcurl's own per-host connection limit: twice our cap. Our cap decides what runs; at
    /// exactly the cap, a transfer started in the slot of one just preempted waited in libcurl's
    /// pending list for seconds, until another transfer to that host ended.
    /// Through a tier every transfer goes to the tier's one host: then the global cap decides.
    /// libcurl's limit is one for all hosts, so a host table's larger `max-per-host` raises it.
    static func hostConnectionLimit(_ policy: DownloadPolicy) -> Int {
        let largestHostCap = policy.hosts.rules.compactMap(\.maxPerHost).reduce(policy.maxPerHost, max)
        return policy.tier == nil ? largestHostCap * 2 : max(largestHostCap, policy.maxParallel) * 2
    }

    /// Starts the loop thread (a plain pthread: its whole life is one loop).
    func start() {
        var thread = pthread_t()
        let engine = Unmanaged.passRetained(self).toOpaque()
        let created = pthread_create(&thread, nil, { argument in
            let engine = Unmanaged<TransferEngine>.fromOpaque(argument!).takeRetainedValue()
            engine.runLoop()
            return nil
        }, engine)
        precondition(created == 0, "cannot start the transfer thread: \(String(cString: strerror(created)))")
        pthread_detach(thread)
    }

    /// Hands `command` to the loop. False when the engine has stopped.
    @discardableResult
    func send(_ command: Command) -> Bool {
        inbox.withLock { inbox in
            guard !inbox.isClosed else { return false }
            // Only the first command since the loop last emptied the inbox needs to wake it.
            if inbox.commands.isEmpty { waker.wakeup() }
            inbox.commands.append(command)
            return true
        }
    }

    /// Makes the loop take another turn (the publisher has room again).
    func nudge() {
        inbox.withLock { inbox in
            if !inbox.isClosed { waker.wakeup() }
        }
    }

    /// Returns once the loop has stopped and released libcurl, or at once when the calling task
    /// is cancelled (the loop goes on stopping).
    func waitUntilStopped() async {
        try? await stopped.wait()
    }

    // MARK: - The loop

    private func runLoop() {
        var isStopping = false
        while !isStopping {
            let commands = inbox.withLock { inbox in
                defer { inbox.commands.removeAll(keepingCapacity: true) }
                return inbox.commands
            }
            if !commands.isEmpty { isQueueStalled = false }
            for command in commands {
                if case .stop = command { isStopping = true } else { handle(command) }
            }
            if isStopping { break }
            let now = ContinuousClock.now
            releaseDueRetries(now: now)
            startTransfers(now: now)
            releaseThrottled(now: now)
            multi!.perform()
            while let (easy, result) = multi!.nextCompleted() {
                complete(easy: easy, result: result)
            }
            releaseThrottled(now: .now)
            endHopelessTransfers(now: .now)
            startTransfers(now: .now)
            shareSlotsFairly(now: .now)
            sweepFailures(now: .now)
            publishStatistics()
            multi!.poll(timeoutMilliseconds: pollTimeout())
        }
        tearDown()
    }

    private func handle(_ command: Command) {
        switch command {
        case .fetch(let token): accept(token)
        case .fetchAll(let tokens): tokens.forEach(accept)
        case .cancelWait(let token): cancelWait(token)
        case .cancelURL(let key, let caller, let reply):
            guard let job = jobs[key] else {
                reply?(false)
                break
            }
            if let caller {
                // Only that caller's: the download goes on for the others (it ends with the last).
                let mine = job.waiters.filter { $0.caller == caller }
                for token in mine { cancelWait(token) }
                reply?(!mine.isEmpty)
            } else {
                finish(job, .failure(.cancelled))
                reply?(true)
            }
        case .cancelSubmitter(let submitter):
            for job in Array(jobs.values) {
                for token in job.waiters where token.submitter == submitter { cancelWait(token) }
            }
        case .forgetFailures(let keys):
            if let keys { for key in keys { failures.forget(key) } } else { failures.forgetAll() }
        case .updatePolicy(let newPolicy):
            policy = newPolicy
            // The cap changes at once for running transfers too: the next bytes meet the new rate.
            bandwidth.setRate(newPolicy.maxRate, now: .now)
            failures.capacity = newPolicy.maxRememberedFailures
            multi?.set(CURLMOPT_MAX_HOST_CONNECTIONS, Self.hostConnectionLimit(newPolicy))
            multi?.set(CURLMOPT_MAXCONNECTS, max(32, newPolicy.maxParallel * 2))
        case .holdSubmitter(let submitter, let held):
            queue.hold(submitter, held)
            // A queued job that another list (not held) also waits for goes on in that one's turn.
            if held {
                for job in jobs.values where job.state == .queued && job.submitter == submitter { takeUnheldTurn(job) }
            }
        case .weighSubmitter(let submitter, let weight):
            queue.weigh(submitter, weight)
        case .limitPrefetch(let limit):
            prefetchLimit = limit
        case .ping(let reply):
            reply()
        case .listFailures(let reply):
            let now = ContinuousClock.now
            reply(Array(failures.live(now: now)))
        case .listFailurePage(let after, let limit, let reply):
            let now = ContinuousClock.now
            reply(RememberedFailurePage(
                of: failures.live(now: now), after: after, limit: limit))
        case .published(let outcomes):
            for outcome in outcomes { published(outcome) }
        case .roomAnswered(let key, let transferSerial, let bytes, let granted):
            // The transfer may have ended meanwhile (cancelled, timed out, preempted, stopped):
            // then the bytes granted for it go back. Another transfer of the same job (a retry,
            // or a restart after preemption) is told apart by its own serial.
            guard let transfer = jobs[key]?.transfer, transfer.serial == transferSerial,
                case .waiting = transfer.room
            else {
                if granted { disk.budget.release(bytes) }
                return
            }
            transfer.roomAnswered(granted: granted, bytes: bytes)
        case .spaceFreed(let key, let serial):
            guard let job = jobs[key], job.serial == serial, job.state == .waitingForSpace else { return }
            move(job, to: .queued)
            queue.enqueueFirst(job, priority: job.priority, submitter: job.submitter)
        case .explain(let key, let url, let reply):
            reply(explanation(of: key, url: url))
        case .stop:
            break
        }
    }

    /// Posts a transfer's request for room to the cache, which makes it on its own queue; the
    /// answer comes back as ``Command/roomAnswered(_:transferSerial:bytes:granted:)``. Until
    /// then the transfer is paused and the loop serves the others.
    func askForRoom(_ transfer: Transfer, bytes: Int) {
        let key = transfer.job.key, serial = transfer.serial
        let publisher = publisher!, budget = disk.budget
        counters.roomRequests += 1
        room.reserve(bytes, settlingFirst: { await publisher.settle() }) { [weak self] granted in
            let sent = self?.send(.roomAnswered(key, transferSerial: serial, bytes: bytes, granted: granted)) ?? false
            if !sent, granted { budget.release(bytes) }
        }
    }

    /// Changes `job`'s state, keeping the per-state gauges in step: the one place states change.
    func move(_ job: Job, to state: Job.State) {
        if job.state == .queued { leaveQueuedCount(job) }
        if state == .queued { enterQueuedCount(job) }
        switch job.state {
        case .waitingRetry: waitingRetryCount -= 1
        case .publishing: publishingCount -= 1
        case .waitingForSpace: waitingForSpaceCount -= 1
        case .queued, .running, .finished: break
        }
        switch state {
        case .waitingRetry: waitingRetryCount += 1
        case .publishing: publishingCount += 1
        case .waitingForSpace: waitingForSpaceCount += 1
        case .queued, .running, .finished: break
        }
        job.state = state
    }

    private func sweepFailures(now: ContinuousClock.Instant) {
        guard now >= nextFailureSweep else { return }
        nextFailureSweep = now + .seconds(30)
        failures.expire(now: now)
    }

    private func pollTimeout() -> Int {
        let now = ContinuousClock.now
        var timeout = multi!.timeoutMilliseconds() ?? 1000
        if let next = retries.min {
            timeout = min(timeout, max(0, (next.readyAt - now).milliseconds + 1))
        }
        // Slots are shared and paces judged on the clock, while there is something to judge.
        if !running.isEmpty { timeout = min(timeout, Self.paceCheckInterval.milliseconds) }
        if let throttle = throttleTimeout(now: now) { timeout = min(timeout, throttle) }
        if queue.entryCount > 0, running.count >= policy.maxParallel {
            timeout = min(timeout, Self.shareCheckInterval.milliseconds)
        }
        if queue.entryCount > 0 {
            for host in hosts.values {
                if let until = host.blockedUntil, until > now {
                    timeout = min(timeout, (until - now).milliseconds + 1)
                }
            }
        }
        return min(timeout, 1000)
    }

    private func tearDown() {
        inbox.withLock { $0.isClosed = true }
        let leftover = inbox.withLock { inbox in
            defer { inbox.commands.removeAll() }
            return inbox.commands
        }
        for command in leftover {
            switch command {
            case .fetch(let token): token.answer(.failure(.cancelled))
            case .fetchAll(let tokens): tokens.forEach { $0.answer(.failure(.cancelled)) }
            // A waiting caller must hear back, or its task never ends.
            case .listFailures(let reply): reply([])
            case .ping(let reply): reply()
            case .listFailurePage(_, let limit, let reply): reply(RememberedFailurePage(of: [], after: nil, limit: limit))
            // Nothing is cancelled by a stopping engine's leftovers but what stopping cancels anyway.
            case .cancelURL(_, _, let reply?): reply(false)
            case .explain(_, let url, let reply):
                reply(.engineStopped(url))
            // Room granted to a transfer that stopping ends: the bytes go back.
            case .roomAnswered(_, _, let bytes, granted: true): disk.budget.release(bytes)
            default: break
            }
        }
        for job in Array(jobs.values) { finish(job, .failure(.cancelled)) }
        // Bodies already with the publisher are published and their rows committed before the
        // engine reports itself stopped: the index is closed (and marked clean) after that.
        publisher.settleBlocking()
        multi = nil
        share = nil
        publishStatistics()
        stopped.fulfill(())
    }
}
