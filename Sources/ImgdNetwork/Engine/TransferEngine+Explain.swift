import ImgdCore

/// `explain`'s view of the engine: one key's job, remembered failure and last outcomes, and its
/// host's slots, queue and hold, copied on the loop thread in one command. It reads a few
/// dictionary entries; nothing here walks the queue or the jobs (a host's queue length is a
/// counter kept as jobs change state).
extension TransferEngine {
    /// Counts `job` as queued for the host of its next request.
    func enterQueuedCount(_ job: Job) {
        let host = job.nextTarget.hostKey
        job.queuedHost = host
        queuedByHost[host, default: 0] += 1
    }

    /// Stops counting `job` as queued.
    func leaveQueuedCount(_ job: Job) {
        guard let host = job.queuedHost else { return }
        job.queuedHost = nil
        let left = (queuedByHost[host] ?? 1) - 1
        queuedByHost[host] = left > 0 ? left : nil
    }

    /// Keeps what became of `job` in ``outcomeHistory``.
    func recordOutcome(of job: Job, _ outcome: Result<CachedImage, DownloadError>) {
        let kind: OutcomeRecord.Kind
        var code: FailureCode?
        var status: Int?
        var bytes = 0
        switch outcome {
        case .success(let image):
            kind = image.source == .network ? .fetched : .revalidated
            bytes = image.bytes
        case .failure(.cancelled):
            kind = .cancelled
        case .failure(let error):
            kind = .failed
            code = error.failureCode
            if case .http(let value, _) = error { status = value }
        }
        let cause: OutcomeRecord.Cause = job.validators != nil ? .revalidation : job.priority == .onDemand ? .onDemand : .prefetch
        outcomeHistory.record(
            OutcomeRecord(
                at: WallClock.nowMilliseconds(), kind: kind, code: code, httpStatus: status, bytes: bytes,
                durationMilliseconds: (ContinuousClock.now - job.acceptedAt).milliseconds, attempts: job.attempts,
                viaTier: job.viaTier, cause: cause),
            for: job.key)
    }

    /// What the engine knows of `key` and `url`'s host, on the loop thread.
    func explanation(of key: CacheKey, url: ImageURL) -> EngineExplanation {
        let now = ContinuousClock.now, wallNow = WallClock.nowMilliseconds()
        func wall(_ instant: ContinuousClock.Instant) -> Int { wallNow + (instant - now).milliseconds }
        let hostKey = url.hostKey
        let rule = policy.hosts.rule(for: url)
        let held = hosts[hostKey]?.blockedUntil.flatMap { $0 > now ? $0 : nil }
        let host = EngineExplanation.Host(
            hostKey: hostKey, running: hosts[hostKey]?.running ?? 0, cap: rule?.maxPerHost ?? policy.maxPerHost,
            queued: queuedByHost[hostKey] ?? 0, rateIntervalMilliseconds: rule?.requestInterval?.milliseconds,
            heldUntil: held.map(wall), heldBy: held == nil ? nil : hosts[hostKey]?.heldBy?.rawValue,
            rulePattern: rule?.hosts.description, sendsHeaders: !policy.hosts.headers(for: url).isEmpty)
        var download: EngineExplanation.Download?
        if let job = jobs[key] {
            let transfer = job.transfer
            let retryAt: Int? = job.state == .waitingRetry ? job.retryAt.map(wall) : nil
            download = EngineExplanation.Download(
                state: Self.stateName(job.state), priority: job.priority == .onDemand ? "on_demand" : "prefetch",
                revalidation: job.validators != nil, waiters: job.waiters.count, attempts: job.attempts,
                preemptions: job.preemptions, since: wall(job.acceptedAt), retryAt: retryAt,
                bytesReceived: transfer?.bytesReceived, declaredBytes: transfer?.declaredLength,
                runningSince: transfer.map { wall($0.startedAt) }, viaTier: transfer.map { $0.tier != nil },
                throttled: transfer?.throttle.isPaused ?? false,
                waitingForRoom: transfer.map { if case .waiting = $0.room { true } else { false } } ?? false,
                pendingHopHost: job.pendingHop?.target.hostKey)
        }
        let remembered = failures.peek(key, now: now)
        var tierURL: String?, bypass: String?
        if let tier = policy.tier {
            if policy.tierRoute(for: url) == nil {
                bypass = "host_headers"
            } else if let through = tier.requestURL(for: url) {
                tierURL = through
            } else {
                bypass = "user_info"
            }
        }
        return EngineExplanation(
            download: download, failure: remembered.map { ($0.error, wall($0.until)) }, host: host,
            queued: jobs.count - running.count - waitingRetryCount - publishingCount - waitingForSpaceCount,
            running: running.count, maxParallel: policy.maxParallel,
            addressRefusal: policy.addresses.refusal(ofHost: url.host),
            hostIsAddress: IPRange.Address(urlHost: url.host) != nil, tierURL: tierURL, tierBypass: bypass,
            outcomes: outcomeHistory.records(for: key), engineRunning: true)
    }

    private static func stateName(_ state: Job.State) -> String {
        switch state {
        case .queued: "queued"
        case .running: "running"
        case .publishing: "publishing"
        case .waitingRetry: "waiting_retry"
        case .waitingForSpace: "waiting_for_space"
        case .finished: "finished"
        }
    }
}
