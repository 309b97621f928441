import ImgdCore

/// Mirrors: other URLs of a job's image (an item's `mirrors`, then its host table's). A failure
/// a mirror can cure moves the job to the next URL at once, as its next attempt (each request to
/// any URL is one attempt of the retry budget); once every URL was asked, the usual back-off
/// applies and the next round starts at the job's own URL. The key never changes: a mirror only
/// says where the bytes come from. Each mirror's request is one of its own: its host's cap,
/// rate, headers and `Retry-After`, its own address check (a refused mirror is skipped), and the
/// tier's route for its URL.
extension TransferEngine {
    /// URLs a job asks in a round, at most: its own and 16 mirrors (8 an item may name and 8 a
    /// host table may; mirrors of waiters that join later fill what is left).
    static let maximumSources = 17

    /// Adds `token`'s mirrors to `job`'s, after those it has; the first waiter's also
    /// brings the host table's (after its own). A mirror equal to a URL already there is left
    /// out, so a mirror naming the URL itself, or two tables naming each other, adds nothing.
    func addSources(of token: FetchToken, to job: Job, isFirst: Bool) {
        var added = token.mirrors
        if isFirst { added += policy.hosts.mirrors(for: job.url) }
        for mirror in added where job.sourceCount < Self.maximumSources && mirror != job.url && !job.mirrors.contains(mirror) {
            job.mirrors.append(mirror)
        }
    }

    /// Whether another URL may succeed where the one just asked failed with `error`: it could
    /// not be reached (name, connection, TLS, a timeout, a broken or cut-short answer), answered
    /// 5xx or 404, or (a mirror only) is at an address the policy refuses. Any other answer is
    /// about the image or the request (403, not an image, too large, a checksum), and every URL
    /// would give it: the job stops as it would without mirrors.
    static func mirrorMayCure(_ error: DownloadError, fromMirror: Bool) -> Bool {
        switch error {
        case .dns, .connect, .tls, .timeout, .network, .truncated: true
        case .http(let status, _): status == 404 || (500...599).contains(status)
        case .policyDenied: fromMirror
        default: false
        }
    }

    /// After `job`'s request to its current source failed with `error`: true when it goes on
    /// at once with its next mirror (queued again at the front of its list, no back-off),
    /// false when the attempt is to be settled as usual (no mirror left in this round, a
    /// failure no mirror cures, or the attempts spent).
    func tryNextSource(_ job: Job, after error: DownloadError) -> Bool {
        guard job.sourceCount > 1 else { return false }
        job.sourceFailures[job.sourceIndex] = error
        guard Self.mirrorMayCure(error, fromMirror: job.sourceIndex > 0), job.sourceIndex + 1 < job.sourceCount,
            job.attempts < policy.retry.maxAttempts
        else { return false }
        // A Retry-After holds the host that sent it, as a retry would; the mirror, on another
        // host, is not held by it.
        if case .http(let status, let after?) = error, status == 429 || status == 503 {
            let host = (job.lastTarget ?? job.source).hostKey
            hosts[host, default: HostState()].blockedUntil = .now + min(after, policy.retry.maxRetryAfter)
            hosts[host]!.heldBy = .retryAfter
        }
        job.sourceIndex += 1
        isQueueStalled = false
        move(job, to: .queued)
        queue.enqueueFirst(job, priority: job.priority, submitter: job.submitter)
        return true
    }

    /// Whether the attempt that ended with `error` is worth another round: the error is
    /// transient, or (the round having asked every URL) any URL's last failure was.
    func isWorthAnotherRound(_ job: Job, after error: DownloadError) -> Bool {
        guard job.sourceCount > 1, Self.mirrorMayCure(error, fromMirror: job.sourceIndex > 0) else {
            return error.isTransient
        }
        return job.sourceFailures.values.contains { $0.isTransient }
    }

    /// The failure `job` ends with after `error`: `error` itself without mirrors, else its own
    /// URL's last failure with each mirror's (``DownloadError/withMirrors(_:mirrors:)``).
    func failureOfSources(_ job: Job, last error: DownloadError) -> DownloadError {
        guard job.sourceCount > 1 else { return error }
        let mirrors = (1..<job.sourceCount).compactMap { index in
            job.sourceFailures[index].map {
                MirrorFailure(url: job.source(at: index).normalized, code: $0.code, message: $0.message)
            }
        }
        guard !mirrors.isEmpty else { return error }
        return .withMirrors(job.sourceFailures[0] ?? error, mirrors: mirrors)
    }

    /// The mirror a body of `job` came from, when it was not the job's own URL.
    func servedBy(_ job: Job) -> String? {
        job.sourceIndex > 0 ? job.source.normalized : nil
    }
}
