import HeapModule
import ImgdCore

/// What the engine runs next: admitting and coalescing requests, queue order under the global
/// and per-host caps, starting transfers, preemption (on-demand first, fair shares between
/// lists), transfers ended for their pace, and retries with their back-off.
extension TransferEngine {
    // MARK: - Admission

    func accept(_ token: FetchToken) {
        if token.isCancelled {
            token.answer(.failure(.cancelled))
            return
        }
        if let remembered = failures.failure(for: token.key, now: .now) {
            counters.rememberedFailures += 1
            publishStatistics()
            if token.isDueRevalidation {
                // The entry was served; the failure was told when it happened.
                token.withdraw()
            } else {
                token.answer(.failure(remembered.error))
            }
            return
        }
        if token.isDueRevalidation, jobs[token.key] != nil {
            // The entry was served; what is under way for its key settles it, and is told.
            token.withdraw()
            return
        }
        if let job = jobs[token.key] {
            counters.coalesced += 1
            job.waiters.append(token)
            if job.state == .queued, queue.isHeld(job.submitter) { takeUnheldTurn(job) }
            if !token.mirrors.isEmpty { addSources(of: token, to: job, isFirst: false) }
            // A request for the body turns a revalidation not yet started into a plain fetch.
            if token.validators == nil, job.state == .queued { job.validators = nil }
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
        addSources(of: token, to: job, isFirst: true)
        enterQueuedCount(job)
        jobs[token.key] = job
        queue.enqueue(job, priority: job.priority, submitter: job.submitter)
    }

    /// A queued job whose submitter is held (a list outside its calendar window) but which a
    /// waiter of another, unheld submitter also waits for is queued again in that submitter's
    /// turn: a list held to the night does not hold up a URL another list needs now. The old
    /// entry stays behind in the held queue; whichever is taken first starts the job.
    func takeUnheldTurn(_ job: Job) {
        guard let other = job.waiters.first(where: { !queue.isHeld($0.submitter) })?.submitter else { return }
        job.submitter = other
        queue.enqueue(job, priority: job.priority, submitter: other)
    }

    func cancelWait(_ token: FetchToken) {
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

    func startTransfers(now: ContinuousClock.Instant) {
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
                let isLive = { (job: Job) in job.state == .queued }
                let canStart = { (job: Job) in !self.publishingKeys.contains(job.key) && self.hostCanStart(job.nextTarget, now: now) }
                // Prefetches at the courtesy cap: only on-demand jobs may take the free slots.
                let picked = arePrefetchSlotsFull
                    ? queue.next(priority: .onDemand, isLive: isLive, canStart: canStart)
                    : queue.next(isLive: isLive, canStart: canStart)
                if let job = picked {
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
        // Each transfer holds a slot of the host it talks to (a redirect's, its target's).
        var prefetchHosts = Set<String>()
        for transfer in running.values where transfer.job.priority < .onDemand {
            prefetchHosts.insert(transfer.target.hostKey)
        }
        let globalFull = running.count >= policy.maxParallel
        var refused = false
        guard let job = queue.next(
            priority: .onDemand, isLive: { $0.state == .queued },
            canStart: { job in
                let host = job.nextTarget.hostKey
                guard !self.publishingKeys.contains(job.key), !self.isBackingOff(host, now: now) else { return false }
                refused = self.refusal(of: job) != nil
                if refused { return true }
                if (self.hosts[host]?.running ?? 0) >= self.perHostCap(job.nextTarget) { return prefetchHosts.contains(host) }
                return !globalFull || !prefetchHosts.isEmpty
            })
        else { return false }
        let host = job.nextTarget.hostKey
        let hostFull = (hosts[host]?.running ?? 0) >= perHostCap(job.nextTarget)
        // `refused` is the picked job's: the scan stops at the first job it accepts.
        if !refused, hostFull || globalFull {
            let victim = running.values
                .filter { $0.job.priority < .onDemand && (!hostFull || $0.target.hostKey == host) }
                .min { ($0.job.preemptions, $0.bytesReceived) < ($1.job.preemptions, $1.bytesReceived) }
            // The pick above made sure there is one.
            if let victim { preempt(victim) }
        }
        start(job)
        return true
    }

    /// One list cannot hold every slot for long while another waits: when all slots are taken
    /// and a list with queued work runs fewer than its fair share (the slots divided among the
    /// lists with work, in proportion to their weights: a list at risk of missing its deadline
    /// weighs more), a transfer of a list above its share that has run longer than
    /// `policy.fairShareGrace` gives way to it — on the waiting job's host when that host is at
    /// its cap. A job gives way for fairness once at most: a large slow body is not restarted
    /// forever. One hand-over per check, every 250 ms at most. A URL the address policy refuses
    /// is started (and so refused at once) without taking anyone's slot, as on demand.
    func shareSlotsFairly(now: ContinuousClock.Instant) {
        guard now >= nextShareCheck else { return }
        nextShareCheck = now + Self.shareCheckInterval
        guard running.count >= policy.maxParallel || arePrefetchSlotsFull else { return }
        let waiting = queue.submitters(at: .prefetch)
        guard !waiting.isEmpty else { return }
        var runningBySubmitter: [SubmitterID: Int] = [:]
        for transfer in running.values where transfer.job.priority == .prefetch {
            runningBySubmitter[transfer.job.submitter, default: 0] += 1
        }
        // Each list's share is in proportion to its weight (1, or more for a list at risk of
        // missing its deadline).
        let sharing = Set(runningBySubmitter.keys).union(waiting)
        let totalWeight = queue.weights.isEmpty ? sharing.count : sharing.reduce(0) { $0 + queue.weight(of: $1) }
        func share(of submitter: SubmitterID) -> Int { max(1, prefetchSlots * queue.weight(of: submitter) / totalWeight) }
        let candidates = running.values.filter {
            $0.job.priority == .prefetch && $0.job.preemptions == 0
                && runningBySubmitter[$0.job.submitter, default: 0] > share(of: $0.job.submitter)
                && now - $0.startedAt >= policy.fairShareGrace
        }
        guard !candidates.isEmpty else { return }
        let candidateHosts = Set(candidates.map { $0.target.hostKey })
        // The heaviest first: a list at risk takes a slot given up before one on an equal share.
        let byWeight = queue.weights.isEmpty
            ? waiting
            : waiting.enumerated().sorted { (queue.weight(of: $1.element), $0.offset) < (queue.weight(of: $0.element), $1.offset) }.map(\.element)
        for submitter in byWeight where runningBySubmitter[submitter, default: 0] < share(of: submitter) {
            let job = queue.next(
                priority: .prefetch, submitter: submitter, isLive: { $0.state == .queued },
                canStart: {
                    let host = $0.nextTarget.hostKey
                    return !self.publishingKeys.contains($0.key) && !self.isBackingOff(host, now: now)
                        && (self.hostCanStart($0.nextTarget, now: now) || candidateHosts.contains(host))
                })
            guard let job else { continue }
            if refusal(of: job) != nil {
                start(job)
                return
            }
            let host = job.nextTarget.hostKey
            let onHost = !hostCanStart(job.nextTarget, now: now)
            let victim = candidates
                .filter { !onHost || $0.target.hostKey == host }
                .min { $0.bytesReceived < $1.bytesReceived }!
            preempt(victim)
            start(job)
            return
        }
    }

    /// The slots prefetches may hold: `maxParallel`, or the courtesy loop's lower cap.
    var prefetchSlots: Int { min(policy.maxParallel, prefetchLimit ?? policy.maxParallel) }

    /// Whether prefetches hold every slot the courtesy cap leaves them. Costs a count of the
    /// running transfers only while such a cap is below `maxParallel`.
    var arePrefetchSlotsFull: Bool {
        guard let limit = prefetchLimit, limit < policy.maxParallel else { return false }
        var prefetches = 0
        for transfer in running.values where transfer.job.priority == .prefetch { prefetches += 1 }
        return prefetches >= limit
    }

    /// How often ``shareSlotsFairly(now:)`` and ``endHopelessTransfers(now:)`` look.
    static let shareCheckInterval: Duration = .milliseconds(250)
    static let paceCheckInterval: Duration = .milliseconds(500)

    /// Ends every transfer whose pace cannot finish its declared body within the attempt's time
    /// (``TransferPace``), as a timeout, instead of letting it hold its slot to the end.
    func endHopelessTransfers(now: ContinuousClock.Instant) {
        guard now >= nextPaceCheck else { return }
        nextPaceCheck = now + Self.paceCheckInterval
        for transfer in Array(running.values) {
            // A transfer held back by max-rate has libcurl's limits judged here; the pace rule
            // then looks at the time it was allowed to receive.
            let overLimit = judgeThrottled(transfer, now: now)
            guard let reason = overLimit ?? TransferPace.shortfall(
                received: transfer.bytesReceived, declared: transfer.declaredLength,
                bodyStartedAt: transfer.bodyStartedAt, startedAt: transfer.startedAt, now: now,
                timeout: transfer.totalTimeout, heldBack: transfer.throttle.heldBack(now: now))
            else { continue }
            let job = transfer.job
            detach(transfer)
            if overLimit == nil { counters.pacedOut += 1 }
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
    func detach(_ transfer: Transfer) {
        isQueueStalled = false
        running[transfer.easy.handle] = nil
        forgetThrottled(transfer)
        multi?.remove(transfer.easy)
        releaseHostSlot(transfer.target.hostKey)
        transfer.discard()
        transfer.job.transfer = nil
    }

    /// A transfer to `hostKey` ended: its slot is free. A host with nothing running and no
    /// back-off pending is forgotten, so the table holds the hosts in use, not every host a
    /// long-running daemon ever fetched from (it is scanned on every turn of the loop).
    func releaseHostSlot(_ hostKey: String) {
        guard var host = hosts[hostKey] else { return }
        host.running -= 1
        if host.running <= 0, (host.blockedUntil ?? .now) <= .now {
            hosts[hostKey] = nil
        } else {
            hosts[hostKey] = host
        }
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
        // Hosts whose back-off lapsed with nothing running are forgotten here (their last
        // transfer ended while they were still backing off).
        let idle = { (host: HostState) in host.running <= 0 && (host.blockedUntil ?? now) <= now }
        if hosts.values.contains(where: idle) { hosts = hosts.filter { !idle($0.value) } }
        stallLapsesAt = hosts.values.compactMap { host in host.blockedUntil.flatMap { $0 > now ? $0 : nil } }.min()
    }

    /// Whether a request to `url`'s host may start now: the host is under its cap and not held
    /// back (by its `rate` or a `Retry-After`).
    func hostCanStart(_ url: ImageURL, now: ContinuousClock.Instant) -> Bool {
        guard let host = hosts[url.hostKey] else { return true }
        if let until = host.blockedUntil, until > now { return false }
        return host.running < perHostCap(url)
    }

    /// Transfers at once to `url`'s `host:port`: its host table's `max-per-host`, else the
    /// policy's.
    private func perHostCap(_ url: ImageURL) -> Int {
        policy.hosts.rule(for: url)?.maxPerHost ?? policy.maxPerHost
    }

    /// Why the address policy refuses `job`'s next request (its host is a literal address in a
    /// denied range; a waiting hop is checked again, as the policy may have been reloaded); nil
    /// when it may be requested. Such a job is started without taking a slot from anyone:
    /// ``start(_:)`` refuses it at once.
    private func refusal(of job: Job) -> String? {
        let target = job.nextTarget
        return policy.addresses.requestRefusal(url: target.normalized, host: target.host, isRedirect: job.pendingHop != nil)
    }

    /// Starts `job` on a fresh easy handle. A handle whose set-up fails goes with the job's
    /// failure: it is never added, pooled or seen by another transfer.
    private func start(_ job: Job) {
        if let hop = job.pendingHop {
            // A redirect's hop that waited for its host: the same attempt goes on. Checked while
            // it is still the job's next request (its own target, as a redirect).
            let reason = refusal(of: job)
            job.pendingHop = nil
            if let reason {
                settle(job, .failure(.policyDenied(reason)))
            } else {
                launch(job, hop: hop, now: .now)
            }
            return
        }
        // A signed URL that expired while it waited is not requested (TransferEngine+Expiry).
        if refuseIfExpired(job) { return }
        job.attempts += 1
        // A URL whose host is a literal address the policy refuses goes no further: no handle, no
        // connection, nothing sent even to a proxy. It counts as an attempt, refused, as a refusal
        // at connect time does.
        if let reason = refusal(of: job) {
            if job.sourceIndex > 0 {
                // A mirror at a refused address is skipped (nothing was asked of it): its refusal
                // is recorded as its failure, and the next URL tried.
                job.attempts -= 1
                settle(job, .failure(.policyDenied(reason)))
                return
            }
            counters.started += 1
            finish(job, .failure(.policyDenied(reason)))
            return
        }
        guard launch(job, target: job.source, redirects: 0) else { return }
        counters.started += 1
        chargeRate(of: job.source)
    }

    /// A host table's `rate`, charged for a request started to `target`'s host (a job's URL or
    /// a redirect's hop: each request counts against the host it goes to): a token bucket of
    /// one request, so the host's next request may start one interval from now. Held like a
    /// Retry-After, which already stops the host's queued jobs and hops, wakes the loop when it
    /// lapses, and keeps the host in the table till then.
    func chargeRate(of target: ImageURL) {
        guard let interval = policy.hosts.rule(for: target)?.requestInterval else { return }
        let next = ContinuousClock.now + interval
        let held = hosts[target.hostKey]?.blockedUntil ?? next
        hosts[target.hostKey, default: HostState()].blockedUntil = max(held, next)
        if next >= held { hosts[target.hostKey]!.heldBy = .rate }
    }

    /// Starts a request of `job`'s attempt for `target` (the job's URL, or a redirect's after
    /// `redirects` hops) on a fresh easy handle, holding a slot of `target`'s host: through the
    /// tier when there is one, unless `direct` (a fallback after the tier failed). A redirect's
    /// request passes `attemptStartedAt`: the chain shares the attempt's time. False when
    /// libcurl could not take it: the job has then failed.
    @discardableResult
    func launch(
        _ job: Job, target: ImageURL, redirects: Int, direct: Bool = false, attemptStartedAt: ContinuousClock.Instant? = nil
    ) -> Bool {
        let easy: CurlEasy
        do throws(CurlSetupError) {
            easy = try CurlEasy(share: share)
        } catch {
            finish(job, .failure(.network("libcurl could not make a transfer handle: \(error)")), remember: false)
            return false
        }
        lastTransferSerial += 1
        let transfer = Transfer(
            job: job, target: target, redirects: redirects, direct: direct, attemptStartedAt: attemptStartedAt,
            serial: lastTransferSerial, easy: easy, disk: disk,
            policy: policy,
            askForRoom: { [unowned self] transfer, bytes in askForRoom(transfer, bytes: bytes) },
            admit: { [unowned self] transfer, bytes in admit(transfer, bytes: bytes) },
            makeSpill: publisher.makeSpill(for:declaredLength:))
        do {
            try transfer.configure(policy)
        } catch {
            finish(job, .failure(.network("libcurl refused imgd's settings: \(error)")), remember: false)
            return false
        }
        guard multi!.add(easy) else {
            finish(job, .failure(.network("libcurl could not add the transfer")), remember: false)
            return false
        }
        move(job, to: .running)
        job.transfer = transfer
        job.viaTier = transfer.tier != nil
        running[easy.handle] = transfer
        // Each request holds a slot of the host it goes to (a redirect's, of its target's host),
        // released when its response is done.
        job.lastTarget = target
        hosts[target.hostKey, default: HostState()].running += 1
        return true
    }

    // MARK: - Retries

    func scheduleRetry(_ job: Job, after error: DownloadError) {
        let now = ContinuousClock.now
        var retryAfter: Duration?
        if case .http(let status, let after?) = error, status == 429 || status == 503 {
            retryAfter = min(after, policy.retry.maxRetryAfter)
            // The host that answered is held back (a redirect's target's, not the job's URL's).
            let host = (job.lastTarget ?? job.url).hostKey
            hosts[host, default: HostState()].blockedUntil = now + retryAfter!
            hosts[host]!.heldBy = .retryAfter
        }
        let delay = policy.retry.delay(afterAttempt: job.attempts, retryAfter: retryAfter)
        if retryOutlivesURL(job, delay: delay) { return }
        move(job, to: .waitingRetry)
        job.retryAt = now + delay
        retrySerial += 1
        retries.insert(RetryEntry(readyAt: now + delay, serial: retrySerial, job: job))
        counters.retries += 1
    }

    func releaseDueRetries(now: ContinuousClock.Instant) {
        while let first = retries.min, first.readyAt <= now {
            let entry = retries.removeMin()
            guard entry.job.state == .waitingRetry else { continue }
            isQueueStalled = false
            move(entry.job, to: .queued)
            queue.enqueueFirst(entry.job, priority: entry.job.priority, submitter: entry.job.submitter)
        }
    }
}
