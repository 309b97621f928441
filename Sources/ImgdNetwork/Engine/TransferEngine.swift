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
final class TransferEngine: @unchecked Sendable {
    enum Command {
        case fetch(FetchToken)
        case fetchAll([FetchToken])
        case cancelWait(FetchToken)
        /// Cancels the job for a URL, if there is one; `reply` (when given) is told whether there
        /// was, on the loop thread.
        case cancelURL(CacheKey, reply: (@Sendable (Bool) -> Void)?)
        case cancelSubmitter(SubmitterID)
        case forgetFailures([CacheKey]?)
        /// A new policy (a reload): transfers that start from now on follow it; running ones finish
        /// under the old one.
        case updatePolicy(DownloadPolicy)
        /// Reports the remembered failures (URL and error) to the callback, on the loop thread.
        case listFailures(@Sendable ([(url: String, error: DownloadError)]) -> Void)
        /// Reports one page of the remembered failures in URL order (after a URL, at most a
        /// number), on the loop thread.
        case listFailurePage(after: String?, limit: Int, reply: @Sendable (RememberedFailurePage) -> Void)
        /// The publisher's verdict on a job's body.
        case published([PublishOutcome])
        /// The cache's answer to a transfer's request for room (``DiskCache/reserveRoom(_:settlingFirst:reply:)``):
        /// the job, its attempt, and the bytes now reserved for it, or refused.
        case roomAnswered(CacheKey, jobSerial: UInt64, attempt: Int, bytes: Int, granted: Bool)
        /// The cache evicted for a job whose write found the filesystem full: it tries again.
        case spaceFreed(CacheKey, jobSerial: UInt64)
        case stop
    }

    private struct Inbox {
        var commands: [Command] = []
        /// Set by the loop as it stops: no more wakeups may reach the multi handle.
        var isClosed = false
    }

    private struct HostState {
        var running = 0
        /// A `Retry-After` from this host holds its queued jobs until then.
        var blockedUntil: ContinuousClock.Instant?
    }

    private struct RetryEntry: Comparable {
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
    private let disk: DiskCache
    /// Set once in init (it needs `self` for its wake-up call) and never changed.
    private var publisher: BodyPublisher!
    private let inbox = Locked(Inbox())
    private let waker: CurlWaker
    private let statistics = Locked(DownloaderStatistics())
    /// Whether the loop has stopped, and who waits for it (by a number, so that a waiter that is
    /// cancelled can leave).
    private let stopped = Locked<(done: Bool, nextWaiter: Int, waiters: [Int: CheckedContinuation<Void, Never>])>(
        (false, 0, [:]))

    // Loop-thread state.
    private var multi: CurlMulti?
    private var jobs: [CacheKey: Job] = [:]
    private var queue = TransferQueue<Job>()
    private var running: [UnsafeMutableRawPointer: Transfer] = [:]
    private var hosts: [String: HostState] = [:]
    private var retries = Heap<RetryEntry>()
    /// See ``noteStall(now:)``: set when nothing could start, with when a back-off ends.
    private var isQueueStalled = false
    private var stallLapsesAt: ContinuousClock.Instant?
    private var retrySerial: UInt64 = 0
    /// Jobs in `.waitingRetry` (the heap may also hold entries of jobs cancelled meanwhile).
    private var waitingRetryCount = 0
    /// Jobs whose body is with the publisher.
    private var publishingCount = 0
    /// Keys whose body is with the publisher, until its outcome comes back, also when the job
    /// was cancelled meanwhile. A new transfer for such a key waits: a body under 64 KiB is
    /// published on the publisher's queue and a larger one on a spill lane, and two bodies of
    /// one key published at once could leave the file of one under the row of the other.
    private var publishingKeys = Set<CacheKey>()
    private var jobSerial: UInt64 = 0
    private var failures: FailureMemory
    private var nextFailureSweep = ContinuousClock.now
    private var nextShareCheck = ContinuousClock.now
    private var nextPaceCheck = ContinuousClock.now
    /// TLS sessions shared by every transfer's handle (see ``CurlShare``); released after the
    /// multi handle, when no easy handle is left.
    private var share: CurlShare?
    private var counters = DownloaderStatistics()

    init(policy: DownloadPolicy, cache: DiskCache) throws(CurlSetupError) {
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
        failures = FailureMemory(capacity: policy.maxRememberedFailures)
        self.cache = cache.directory
        self.disk = cache
        self.publisher = BodyPublisher(
            cache: cache, validator: ImageValidator(maxPixels: policy.maxPixels),
            deliver: { [weak self] outcomes in self?.send(.published(outcomes)) },
            wake: { [weak self] in self?.nudge() })
    }

    /// libcurl's own per-host connection limit: twice our cap. Our cap decides what runs; at
    /// exactly the cap, a transfer started in the slot of one just preempted waited in libcurl's
    /// pending list for seconds, until another transfer to that host ended.
    static func hostConnectionLimit(_ policy: DownloadPolicy) -> Int { policy.maxPerHost * 2 }

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

    /// Counters and gauges as of the loop's last turn.
    var snapshot: DownloaderStatistics { statistics.withLock { $0 } }

    /// Returns once the loop has stopped and released libcurl, or at once when the calling task
    /// is cancelled (the loop goes on stopping).
    func waitUntilStopped() async {
        let number = stopped.withLock { state in
            defer { state.nextWaiter += 1 }
            return state.nextWaiter
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let registered = stopped.withLock { state in
                    guard !state.done, !Task.isCancelled else { return false }
                    state.waiters[number] = continuation
                    return true
                }
                if !registered { continuation.resume() }
            }
        } onCancel: {
            stopped.withLock { $0.waiters.removeValue(forKey: number) }?.resume()
        }
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
            multi!.perform()
            while let (easy, result) = multi!.nextCompleted() {
                complete(easy: easy, result: result)
            }
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
        case .cancelURL(let key, let reply):
            let job = jobs[key]
            if let job { finish(job, .failure(.cancelled)) }
            reply?(job != nil)
        case .cancelSubmitter(let submitter):
            for job in Array(jobs.values) {
                for token in job.waiters where token.submitter == submitter { cancelWait(token) }
            }
        case .forgetFailures(let keys):
            if let keys { for key in keys { failures.forget(key) } } else { failures.forgetAll() }
        case .updatePolicy(let newPolicy):
            policy = newPolicy
            failures.capacity = newPolicy.maxRememberedFailures
            multi?.set(CURLMOPT_MAX_HOST_CONNECTIONS, Self.hostConnectionLimit(newPolicy))
            multi?.set(CURLMOPT_MAXCONNECTS, max(32, newPolicy.maxParallel * 2))
        case .listFailures(let reply):
            let now = ContinuousClock.now
            reply(Array(failures.live(now: now)))
        case .listFailurePage(let after, let limit, let reply):
            let now = ContinuousClock.now
            reply(RememberedFailurePage(
                of: failures.live(now: now), after: after, limit: limit))
        case .published(let outcomes):
            for outcome in outcomes { published(outcome) }
        case .roomAnswered(let key, let serial, let attempt, let bytes, let granted):
            // The transfer may have ended meanwhile (cancelled, timed out, stopped): then the
            // bytes granted for it go back.
            guard let transfer = jobs[key]?.transfer, transfer.job.serial == serial, transfer.job.attempts == attempt,
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
        case .stop:
            break
        }
    }

    private func accept(_ token: FetchToken) {
        if token.isCancelled {
            token.answer(.failure(.cancelled))
            return
        }
        if let remembered = failures.failure(for: token.key, now: .now) {
            counters.rememberedFailures += 1
            publishStatistics()
            token.answer(.failure(remembered.error))
            return
        }
        if let job = jobs[token.key] {
            counters.coalesced += 1
            job.waiters.append(token)
            if token.priority > job.priority {
                job.priority = token.priority
                // The old entry stays behind in the lower level; whichever is taken first starts
                // the job and the other is dropped as no longer queued.
                if job.state == .queued { queue.enqueueFirst(job, priority: job.priority, submitter: job.submitter) }
            }
            return
        }
        jobSerial += 1
        let job = Job(first: token, serial: jobSerial)
        jobs[token.key] = job
        queue.enqueue(job, priority: job.priority, submitter: job.submitter)
    }

    private func cancelWait(_ token: FetchToken) {
        guard let job = jobs[token.key], let index = job.waiters.firstIndex(where: { $0 === token }) else {
            token.answer(.failure(.cancelled))
            return
        }
        job.waiters.remove(at: index)
        // The last waiter leaving ends the job before it is answered: its transfer is stopped and
        // its temp file gone by then, so a caller told "cancelled" finds nothing left behind.
        if job.waiters.isEmpty { finish(job, .failure(.cancelled)) }
        token.answer(.failure(.cancelled))
    }

    // MARK: - Starting

    /// Bodies allowed to wait for the publisher before transfers stop starting: enough to keep
    /// it busy, few enough that memory stays bounded (each holds at most one 64 KiB buffer, so
    /// 4 MiB at 64). Not fewer than 64 whatever the cap: with 16 (the cap's value at 16), the
    /// engine stopped at 16 waiting bodies and restarted at 8, and the publisher ran dry while
    /// the restarted transfers made their round trips — warming 20,000 small images at cap 16
    /// took 2.3–3.0 s instead of 1.8–2.1 s (bench/README.md).
    private var publishBacklog: Int { max(64, policy.maxParallel) }

    private func startTransfers(now: ContinuousClock.Instant) {
        if isQueueStalled {
            // Nothing could start at the last look and nothing has changed since but the clock.
            guard let lapse = stallLapsesAt, now >= lapse else { return }
            isQueueStalled = false
        }
        while true {
            if publisher.backlog >= publishBacklog {
                publisher.wakeWhenBacklog(reaches: publishBacklog / 2)
                return
            }
            if running.count < policy.maxParallel {
                if let job = queue.next(
                    isLive: { $0.state == .queued },
                    canStart: { !self.publishingKeys.contains($0.key) && self.hostCanStart($0.url.hostKey, now: now) })
                {
                    start(job)
                    continue
                }
                if startOnDemandByPreempting(now: now) { continue }
                noteStall(now: now)
                return
            }
            if startOnDemandByPreempting(now: now) { continue }
            return
        }
    }

    // MARK: - Sharing the slots

    /// An on-demand request never waits behind prefetches for a slot: when the caps hold back a
    /// queued on-demand job, a running prefetch gives way — one on the job's host if that host
    /// is at its cap, else any — preferring one not preempted before, then the one with the
    /// fewest bytes received, so the least work is lost. Only a job for which such a prefetch
    /// exists is picked: one held back by on-demand transfers waits without blocking the others
    /// behind it. A URL the address policy refuses is started (and so refused at once) without
    /// taking anyone's slot. Returns true when it started an on-demand job.
    private func startOnDemandByPreempting(now: ContinuousClock.Instant) -> Bool {
        // Called whenever nothing else could start (every turn while the slots are full): the
        // common case, no on-demand job at all, costs one test.
        guard queue.hasEntries(at: .onDemand) else { return false }
        var prefetchHosts = Set<String>()
        for transfer in running.values where transfer.job.priority < .onDemand {
            prefetchHosts.insert(transfer.job.url.hostKey)
        }
        let globalFull = running.count >= policy.maxParallel
        var refused = false
        guard let job = queue.next(
            priority: .onDemand, isLive: { $0.state == .queued },
            canStart: { job in
                let host = job.url.hostKey
                guard !self.publishingKeys.contains(job.key), !self.isBackingOff(host, now: now) else { return false }
                refused = self.policy.addresses.requestRefusal(url: job.url.normalized, host: job.url.host, isRedirect: false) != nil
                if refused { return true }
                if (self.hosts[host]?.running ?? 0) >= self.policy.maxPerHost { return prefetchHosts.contains(host) }
                return !globalFull || !prefetchHosts.isEmpty
            })
        else { return false }
        let host = job.url.hostKey
        let hostFull = (hosts[host]?.running ?? 0) >= policy.maxPerHost
        // `refused` is the picked job's: the scan stops at the first job it accepts.
        if !refused, hostFull || globalFull {
            let victim = running.values
                .filter { $0.job.priority < .onDemand && (!hostFull || $0.job.url.hostKey == host) }
                .min { ($0.job.preemptions, $0.bytesReceived) < ($1.job.preemptions, $1.bytesReceived) }
            // The pick above made sure there is one.
            if let victim { preempt(victim) }
        }
        start(job)
        return true
    }

    /// One list cannot hold every slot for long while another waits: when all slots are taken
    /// and a list with queued work runs fewer than its fair share (the slots divided among the
    /// lists with work), a transfer of a list above its share that has run longer than
    /// `policy.fairShareGrace` gives way to it — on the waiting job's host when that host is at
    /// its cap. A job gives way for fairness once at most: a large slow body is not restarted
    /// forever. One hand-over per check, every 250 ms at most.
    private func shareSlotsFairly(now: ContinuousClock.Instant) {
        guard now >= nextShareCheck else { return }
        nextShareCheck = now + Self.shareCheckInterval
        guard running.count >= policy.maxParallel else { return }
        let waiting = queue.submitters(at: .prefetch)
        guard !waiting.isEmpty else { return }
        var runningBySubmitter: [SubmitterID: Int] = [:]
        for transfer in running.values where transfer.job.priority == .prefetch {
            runningBySubmitter[transfer.job.submitter, default: 0] += 1
        }
        let share = max(1, policy.maxParallel / Set(runningBySubmitter.keys).union(waiting).count)
        let candidates = running.values.filter {
            $0.job.priority == .prefetch && $0.job.preemptions == 0
                && runningBySubmitter[$0.job.submitter, default: 0] > share
                && now - $0.startedAt >= policy.fairShareGrace
        }
        guard !candidates.isEmpty else { return }
        let candidateHosts = Set(candidates.map { $0.job.url.hostKey })
        for submitter in waiting where runningBySubmitter[submitter, default: 0] < share {
            let job = queue.next(
                priority: .prefetch, submitter: submitter, isLive: { $0.state == .queued },
                canStart: {
                    let host = $0.url.hostKey
                    return !self.publishingKeys.contains($0.key) && !self.isBackingOff(host, now: now)
                        && (self.hostCanStart(host, now: now) || candidateHosts.contains(host))
                })
            guard let job else { continue }
            let host = job.url.hostKey
            let onHost = !hostCanStart(host, now: now)
            let victim = candidates
                .filter { !onHost || $0.job.url.hostKey == host }
                .min { $0.bytesReceived < $1.bytesReceived }!
            preempt(victim)
            start(job)
            return
        }
    }

    /// How often ``shareSlotsFairly(now:)`` and ``endHopelessTransfers(now:)`` look.
    static let shareCheckInterval: Duration = .milliseconds(250)
    static let paceCheckInterval: Duration = .milliseconds(500)

    /// Ends every transfer whose pace cannot finish its declared body within the attempt's time
    /// (``TransferPace``), as a timeout, instead of letting it hold its slot to the end.
    private func endHopelessTransfers(now: ContinuousClock.Instant) {
        guard now >= nextPaceCheck else { return }
        nextPaceCheck = now + Self.paceCheckInterval
        for transfer in Array(running.values) {
            guard let reason = TransferPace.shortfall(
                received: transfer.bytesReceived, declared: transfer.declaredLength,
                bodyStartedAt: transfer.bodyStartedAt, startedAt: transfer.startedAt, now: now,
                timeout: transfer.totalTimeout)
            else { continue }
            let job = transfer.job
            detach(transfer)
            counters.pacedOut += 1
            settle(job, .failure(.timeout(reason)))
        }
    }

    /// Takes a running prefetch off its slot and puts its job back at the front of its list's
    /// queue: not failed, and the attempt is not counted.
    private func preempt(_ transfer: Transfer) {
        let job = transfer.job
        detach(transfer)
        job.attempts -= 1
        job.preemptions += 1
        move(job, to: .queued)
        queue.enqueueFirst(job, priority: job.priority, submitter: job.submitter)
        counters.preempted += 1
    }

    /// Stops a running transfer and frees its slot: libcurl lets go of the handle, the temp file
    /// and the space held go, and the job is left to the caller.
    private func detach(_ transfer: Transfer) {
        isQueueStalled = false
        running[transfer.easy.handle] = nil
        multi?.remove(transfer.easy)
        hosts[transfer.job.url.hostKey]?.running -= 1
        transfer.discard()
        transfer.job.transfer = nil
    }

    private func isBackingOff(_ hostKey: String, now: ContinuousClock.Instant) -> Bool {
        guard let until = hosts[hostKey]?.blockedUntil else { return false }
        return until > now
    }

    /// The queue had no job that may start (empty, or every job scanned waits for a host at its
    /// cap or backing off): skip looking again until something changes — a command (a new job,
    /// new limits), a transfer ending (a freed slot), a retry coming due — or a host's back-off
    /// ends. With one host and more global slots than its cap (the default 8 and 4), every
    /// turn of the loop would otherwise scan up to ``TransferQueue/scanWindow`` blocked jobs.
    private func noteStall(now: ContinuousClock.Instant) {
        isQueueStalled = true
        stallLapsesAt = hosts.values.compactMap { host in host.blockedUntil.flatMap { $0 > now ? $0 : nil } }.min()
    }

    private func hostCanStart(_ hostKey: String, now: ContinuousClock.Instant) -> Bool {
        guard let host = hosts[hostKey] else { return true }
        if let until = host.blockedUntil, until > now { return false }
        return host.running < policy.maxPerHost
    }

    /// Starts `job` on a fresh easy handle. A handle whose set-up fails goes with the job's
    /// failure: it is never added, pooled or seen by another transfer.
    private func start(_ job: Job) {
        job.attempts += 1
        // A URL whose host is a literal address the policy refuses goes no further: no handle, no
        // connection, nothing sent even to a proxy. It counts as an attempt, refused, as a refusal
        // at connect time does.
        if let reason = policy.addresses.requestRefusal(url: job.url.normalized, host: job.url.host, isRedirect: false) {
            counters.started += 1
            finish(job, .failure(.policyDenied(reason)))
            return
        }
        let easy: CurlEasy
        do throws(CurlSetupError) {
            easy = try CurlEasy(share: share)
        } catch {
            finish(job, .failure(.network("libcurl could not make a transfer handle: \(error)")), remember: false)
            return
        }
        let transfer = Transfer(
            job: job, easy: easy, disk: disk, policy: policy,
            askForRoom: { [unowned self] transfer, bytes in askForRoom(transfer, bytes: bytes) },
            makeSpill: publisher.makeSpill)
        do {
            try transfer.configure(policy)
        } catch {
            finish(job, .failure(.network("libcurl refused imgd's settings: \(error)")), remember: false)
            return
        }
        guard multi!.add(easy) else {
            finish(job, .failure(.network("libcurl could not add the transfer")), remember: false)
            return
        }
        move(job, to: .running)
        job.transfer = transfer
        running[easy.handle] = transfer
        hosts[job.url.hostKey, default: HostState()].running += 1
        counters.started += 1
    }

    // MARK: - Completing

    private func complete(easy: UnsafeMutableRawPointer, result: CURLcode) {
        guard let transfer = running.removeValue(forKey: easy) else { return }
        isQueueStalled = false  // a slot is free, for its host too
        multi!.remove(transfer.easy)
        let job = transfer.job
        job.transfer = nil
        hosts[job.url.hostKey]?.running -= 1
        // The handle goes with the transfer once `conclude` has read what it needs from it.
        let arrival = conclude(transfer, result: result)
        switch arrival {
        case .success(let body):
            // The slot is free now; the disk work happens on the publisher while the loop goes on.
            move(job, to: .publishing)
            // More bodies are coming while transfers run or jobs wait for a slot (the loop may be
            // holding them back for the publisher's backlog): this row may wait to share their
            // index transaction.
            let queued = jobs.count - running.count - waitingRetryCount - publishingCount
            publishingKeys.insert(job.key)
            publisher.publish(body, moreExpected: !running.isEmpty || queued > 0)
        case .failure(let error):
            settle(job, .failure(error))
        }
    }

    /// Ends an attempt: success finishes the job; a transient failure schedules another attempt
    /// while attempts remain; anything else finishes it with the error.
    private func settle(_ job: Job, _ outcome: Result<CachedImage, DownloadError>) {
        switch outcome {
        case .success(let image):
            counters.bytesDownloaded += image.bytes
            finish(job, .success(image))
        case .failure(.disk(_, outOfSpace: true)) where !job.retriedForSpace:
            // The filesystem is fuller than the cap says (other files share it): the cache evicts
            // on its own queue, and the job (holding no slot) tries once more as soon as that is
            // done.
            job.retriedForSpace = true
            move(job, to: .waitingForSpace)
            let key = job.key, serial = job.serial
            disk.freeSpace(Self.spaceToFreeOnENOSPC) { [weak self] in
                _ = self?.send(.spaceFreed(key, jobSerial: serial))
            }
        case .failure(let error):
            if error.isTransient, job.attempts < policy.retry.maxAttempts {
                scheduleRetry(job, after: error)
            } else {
                finish(job, .failure(error))
            }
        }
    }

    /// Posts a transfer's request for room to the cache, which makes it on its own queue; the
    /// answer comes back as ``Command/roomAnswered(_:jobSerial:attempt:bytes:granted:)``. Until
    /// then the transfer is paused and the loop serves the others.
    private func askForRoom(_ transfer: Transfer, bytes: Int) {
        let key = transfer.job.key, serial = transfer.job.serial, attempt = transfer.job.attempts
        let publisher = publisher!, budget = disk.budget
        counters.roomRequests += 1
        disk.reserveRoom(bytes, settlingFirst: { publisher.settle() }) { [weak self] granted in
            let sent = self?.send(.roomAnswered(key, jobSerial: serial, attempt: attempt, bytes: bytes, granted: granted)) ?? false
            if !sent, granted { budget.release(bytes) }
        }
    }

    /// Bytes evicted when a write finds the filesystem full, before the one retry.
    static let spaceToFreeOnENOSPC = 8 << 20

    private func published(_ outcome: PublishOutcome) {
        publishingKeys.remove(outcome.key)
        // A job cancelled meanwhile has already answered its waiters; its file, if published,
        // is a valid cache entry all the same.
        guard let job = jobs[outcome.key], job.serial == outcome.jobSerial, job.state == .publishing else { return }
        settle(job, outcome.result)
    }

    /// Classifies a finished transfer from what libcurl and the callbacks saw. A complete 2xx
    /// body comes back as an ``ArrivedBody`` for the publisher; anything else as a failure.
    private func conclude(_ transfer: Transfer, result: CURLcode) -> Result<ArrivedBody, DownloadError> {
        let easy = transfer.easy
        let status = easy.info(long: CURLINFO_RESPONSE_CODE) ?? 0
        let failure: DownloadError? = {
            if let abort = transfer.abort {
                switch abort {
                case .tooLarge(let limit):
                    return .tooLarge("the body is over the \(limit)-byte limit")
                case .notImage:
                    return .notImage("the body does not start like an image (Content-Type \(easy.info(string: CURLINFO_CONTENT_TYPE) ?? "none"))")
                case .disk(let error):
                    return .disk(error.description, outOfSpace: error.isOutOfSpace)
                case .diskFull(let needed):
                    let budget = disk.budget.snapshot
                    return .diskFull(
                        "\(needed) bytes do not fit under the cache's \(budget.limit)-byte limit "
                            + "(\(budget.stored) stored, \(budget.reserved) reserved, nothing more can be evicted)")
                case .policyDenied(let reason):
                    if result != CURLE_OK { return .policyDenied(reason) }
                }
            }
            if result != CURLE_OK, !(result == CURLE_WRITE_ERROR && !(200..<300).contains(status)) {
                return FailureClassifier.classify(
                    result, detail: transfer.errorDetail, bytesReceived: transfer.bytesReceived, responseStatus: status,
                    maxRedirects: policy.maxRedirects)
            }
            guard (200..<300).contains(status) else {
                var retryAfter: Duration?
                if let seconds = easy.info(offset: CURLINFO_RETRY_AFTER), seconds > 0 { retryAfter = .seconds(seconds) }
                return .http(status: status, retryAfter: retryAfter)
            }
            if let declared = easy.info(offset: CURLINFO_CONTENT_LENGTH_DOWNLOAD_T), declared >= 0,
                declared != transfer.bytesReceived
            {
                return .truncated("received \(transfer.bytesReceived) bytes of a declared \(declared)")
            }
            return nil
        }()
        if let failure {
            transfer.discard()
            return .failure(failure)
        }
        let job = transfer.job
        return .success(ArrivedBody(
            url: job.url, key: job.key, jobSerial: job.serial, buffer: transfer.buffer, spill: transfer.spill,
            bytes: transfer.bytesReceived, reservation: transfer.reservation,
            finalURL: easy.info(string: CURLINFO_EFFECTIVE_URL) ?? job.url.normalized, status: status,
            etag: easy.header("ETag"), lastModified: easy.header("Last-Modified"),
            contentType: easy.info(string: CURLINFO_CONTENT_TYPE),
            duration: ContinuousClock.now - transfer.startedAt, attempts: job.attempts))
    }

    private func scheduleRetry(_ job: Job, after error: DownloadError) {
        let now = ContinuousClock.now
        var retryAfter: Duration?
        if case .http(let status, let after?) = error, status == 429 || status == 503 {
            retryAfter = min(after, policy.retry.maxRetryAfter)
            hosts[job.url.hostKey, default: HostState()].blockedUntil = now + retryAfter!
        }
        let delay = policy.retry.delay(afterAttempt: job.attempts, retryAfter: retryAfter)
        move(job, to: .waitingRetry)
        retrySerial += 1
        retries.insert(RetryEntry(readyAt: now + delay, serial: retrySerial, job: job))
        counters.retries += 1
    }

    private func releaseDueRetries(now: ContinuousClock.Instant) {
        while let first = retries.min, first.readyAt <= now {
            let entry = retries.removeMin()
            guard entry.job.state == .waitingRetry else { continue }
            isQueueStalled = false
            move(entry.job, to: .queued)
            queue.enqueueFirst(entry.job, priority: entry.job.priority, submitter: entry.job.submitter)
        }
    }

    /// Changes `job`'s state, keeping the per-state gauges in step: the one place states change.
    private func move(_ job: Job, to state: Job.State) {
        switch job.state {
        case .waitingRetry: waitingRetryCount -= 1
        case .publishing: publishingCount -= 1
        case .queued, .running, .waitingForSpace, .finished: break
        }
        switch state {
        case .waitingRetry: waitingRetryCount += 1
        case .publishing: publishingCount += 1
        case .queued, .running, .waitingForSpace, .finished: break
        }
        job.state = state
    }

    /// Ends `job`: every waiter gets `outcome`; the job leaves the table on success and on
    /// failure alike, so a later request starts afresh (after the failure memory lapses).
    /// `remember: false` for failures of this machine that the error's class does not tell
    /// (libcurl refusing a handle): they say nothing about the URL.
    private func finish(_ job: Job, _ outcome: Result<CachedImage, DownloadError>, remember: Bool = true) {
        if let transfer = job.transfer { detach(transfer) }
        move(job, to: .finished)
        if jobs[job.key] === job { jobs[job.key] = nil }
        switch outcome {
        case .success:
            counters.succeeded += 1
        case .failure(.cancelled):
            counters.cancelled += 1
        case .failure(let error):
            counters.failed += 1
            // Only what the URL did is remembered: a full disk or cache says nothing about the
            // URL, and once space is back the next request must fetch it.
            if remember, !error.isLocal {
                failures.remember(job.key, url: job.url.normalized, error: error, until: .now + policy.failureMemory)
            }
        }
        // Published before the answers: a caller that reads the statistics once answered finds
        // its own outcome counted (else it waited for the end of the loop's turn).
        publishStatistics()
        for token in job.waiters { token.answer(outcome) }
        job.waiters = []
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

    private func publishStatistics() {
        counters.running = running.count
        counters.queued = jobs.count - running.count - waitingRetryCount - publishingCount
        counters.waitingRetry = waitingRetryCount
        let current = counters
        statistics.withLock { $0 = current }
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
            case .listFailurePage(_, let limit, let reply): reply(RememberedFailurePage(of: [], after: nil, limit: limit))
            // Nothing is cancelled by a stopping engine's leftovers but what stopping cancels anyway.
            case .cancelURL(_, let reply?): reply(false)
            default: break
            }
        }
        for job in Array(jobs.values) { finish(job, .failure(.cancelled)) }
        // Bodies already with the publisher are published and their rows committed before the
        // engine reports itself stopped: the index is closed (and marked clean) after that.
        publisher.settle()
        multi = nil
        share = nil
        publishStatistics()
        let waiters = stopped.withLock { state in
            state.done = true
            defer { state.waiters = [:] }
            return state.waiters.values
        }
        for waiter in waiters { waiter.resume() }
    }
}

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
    /// Requests answered from the remembered-failure table.
    public var rememberedFailures = 0
    /// Body bytes of published images.
    public var bytesDownloaded = 0
    /// Prefetch transfers that gave their slot to an on-demand request or to a list below its
    /// fair share (put back in the queue, not failed).
    public var preempted = 0
    /// Transfers ended early as timeouts because their pace could not finish the declared body in time.
    public var pacedOut = 0
    /// Times a body met the cap and its transfer paused while the cache made room (evicting on
    /// its own queue, never on the transfer thread).
    public var roomRequests = 0
}
