import CCurlShim
import ImgdCore

/// How a transfer ends: what libcurl and the callbacks saw is classified (``conclude(_:result:)``),
/// a whole body goes to the publisher, and its verdict or the failure settles the job — finished,
/// retried, or waiting for the cache to free space.
extension TransferEngine {
    func complete(easy: UnsafeMutableRawPointer, result: CURLcode) {
        guard let transfer = running.removeValue(forKey: easy) else { return }
        isQueueStalled = false  // a slot is free, for its host too
        forgetThrottled(transfer)
        multi!.remove(transfer.easy)
        let job = transfer.job
        job.transfer = nil
        releaseHostSlot(transfer.target.hostKey)
        if let next = nextRequest(after: transfer, result: result) {
            // Another request of the same attempt, in the slot just freed, or its refusal.
            take(next, after: transfer)
            return
        }
        // A revalidation answered 304 (not a redirect, not a tier error: both were settled above).
        if job.validators != nil, result == CURLE_OK, transfer.abort == nil,
            transfer.easy.info(long: CURLINFO_RESPONSE_CODE) == 304
        {
            notModified(transfer)
            return
        }
        // The handle goes with the transfer once `conclude` has read what it needs from it.
        let arrival = expiring(conclude(transfer, result: result), of: job)
        transferDurations.record(ContinuousClock.now - transfer.startedAt, succeeded: arrival.isSuccess)
        switch arrival {
        case .success(let body) where job.documentLimit != nil:
            settle(job, .success(CachedImage(document: body)))
        case .success(let body):
            // The slot is free now; the disk work happens on the publisher while the loop goes on.
            move(job, to: .publishing)
            // More bodies are coming while transfers run or jobs wait for a slot (the loop may be
            // holding them back for the publisher's backlog): this row may wait to share their
            // index transaction.
            let queued = jobs.count - running.count - waitingRetryCount - publishingCount - waitingForSpaceCount
            publishingKeys.insert(job.key)
            publisher.publish(body, moreExpected: !running.isEmpty || queued > 0)
        case .failure(let error):
            settle(job, .failure(error))
        }
    }

    /// A revalidation answered `304`: the publisher renews the entry's freshness (its file stays
    /// as it is) and the job ends with its verdict, as a body's would.
    private func notModified(_ transfer: Transfer) {
        let job = transfer.job, easy = transfer.easy
        let response = easy.responseFreshness(receivedAt: WallClock.nowMilliseconds())
        let etag = easy.header("ETag"), lastModified = easy.header("Last-Modified")
        transfer.discard()
        move(job, to: .publishing)
        publishingKeys.insert(job.key)
        publisher.revalidated(
            url: job.url, key: job.key, jobSerial: job.serial, response: response, etag: etag, lastModified: lastModified)
        transferDurations.record(ContinuousClock.now - transfer.startedAt, succeeded: true)
    }

    /// Ends an attempt: success finishes the job; a transient failure schedules another attempt
    /// while attempts remain; anything else finishes it with the error.
    func settle(_ job: Job, _ outcome: Result<CachedImage, DownloadError>) {
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
            room.freeSpace(Self.spaceToFreeOnENOSPC) { [weak self] in
                _ = self?.send(.spaceFreed(key, jobSerial: serial))
            }
        case .failure(let error) where error.failureCode == .checksumMismatch && job.attempts < 2:
            // Once more, whatever the attempts setting: a cache in front of the origin may have
            // served an older copy.
            scheduleRetry(job, after: error)
        case .failure(let error):
            // With mirrors: the next URL at once, or the next round from the job's own URL.
            if tryNextSource(job, after: error) { return }
            if isWorthAnotherRound(job, after: error), job.attempts < policy.retry.maxAttempts {
                job.sourceIndex = 0
                scheduleRetry(job, after: error)
            } else {
                finish(job, .failure(failureOfSources(job, last: error)))
            }
        }
    }

    /// Bytes evicted when a write finds the filesystem full, before the one retry.
    static let spaceToFreeOnENOSPC = 8 << 20

    func published(_ outcome: PublishOutcome) {
        publishingKeys.remove(outcome.key)
        // A job cancelled meanwhile has already answered its waiters; its file, if published,
        // is a valid cache entry all the same.
        guard let job = jobs[outcome.key], job.serial == outcome.jobSerial, job.state == .publishing else { return }
        if outcome.revalidated, case .success = outcome.result {
            counters.revalidated += 1
            finish(job, outcome.result)
            return
        }
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
        let freshness = easy.responseFreshness(receivedAt: WallClock.nowMilliseconds())
        if failure == nil, freshness.noStore, transfer.job.documentLimit == nil {
            transfer.discard()
            return .failure(.notCacheable("the response says Cache-Control: no-store, so imgd does not keep it"))
        }
        if let failure {
            transfer.discard()
            return .failure(failure)
        }
        let job = transfer.job
        return .success(ArrivedBody(
            url: job.url, key: job.key, jobSerial: job.serial, buffer: transfer.buffer, spill: transfer.spill,
            bytes: transfer.bytesReceived, reservation: transfer.reservation,
            finalURL: transfer.target.normalized, status: status,
            etag: easy.header("ETag"), lastModified: easy.header("Last-Modified"),
            contentType: easy.info(string: CURLINFO_CONTENT_TYPE),
            duration: ContinuousClock.now - transfer.startedAt, attempts: job.attempts, expectedSHA256: job.expectedSHA256,
            freshness: freshness, servedBy: servedBy(job), owner: job.owner))
    }

    /// Ends `job`: every waiter gets `outcome`; the job leaves the table on success and on
    /// failure alike, so a later request starts afresh (after the failure memory lapses).
    /// `remember: false` for failures of this machine that the error's class does not tell
    /// (libcurl refusing a handle): they say nothing about the URL.
    func finish(_ job: Job, _ outcome: Result<CachedImage, DownloadError>, remember: Bool = true) {
        if let transfer = job.transfer { detach(transfer) }
        recordOutcome(of: job, outcome)
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
            // URL, and once space is back the next request must fetch it; a checksum mismatch
            // is about the digest asked for, which the next request may name differently.
            // An expired URL's failure neither: a re-signed URL of the same key must be fetched.
            if remember, !error.isLocal, error.failureCode != .checksumMismatch, error.failureCode != .urlExpired {
                failures.remember(job.key, url: job.url.normalized, error: error, until: .now + policy.failureMemory)
            }
        }
        // Published before the answers: a caller that reads the statistics once answered finds
        // its own outcome counted (else it waited for the end of the loop's turn).
        publishStatistics()
        for token in job.waiters {
            if case .success(let image) = outcome, let wanted = token.expectedSHA256, let received = image.download?.sha256,
                wanted != received
            {
                token.answer(.failure(.checksumMismatch(expected: wanted, received: received)))
            } else {
                token.answer(outcome)
            }
        }
        job.waiters = []
    }
}
