import CCurlShim

/// `max-rate`: one token bucket (``BandwidthBucket``) over every transfer the cap applies to,
/// kept on the loop thread. A transfer's write callback asks it before taking bytes
/// (``admit(_:bytes:)``); refused, the transfer pauses (libcurl keeps the bytes and offers them
/// again), joins the back of ``throttled``, and is resumed as tokens come back, on-demand
/// transfers first, then in that order (``releaseThrottled(now:)``, each turn of the loop, which
/// wakes for the refill). Pausing stops
/// only that transfer: over HTTP/2 libcurl closes the paused stream's window and the other
/// streams on the connection go on.
///
/// A transfer once held back has its time limits judged here rather than by libcurl
/// (``TransferThrottle``), so that imgd's own throttling never counts as a slow origin.
extension TransferEngine {
    /// Whether the cap holds `transfer` back: a cap is set, and it applies to every transfer or
    /// the job is a prefetch (a `get` joining it makes it on-demand, and exempt, at once).
    func capApplies(to transfer: Transfer) -> Bool {
        guard bandwidth.rate != nil else { return false }
        return policy.maxRateAppliesTo == .all || transfer.job.priority < .onDemand
    }

    /// Called from `transfer`'s write callback with the bytes libcurl offers: true when they may
    /// be taken now (they are counted), false when the transfer must pause for the cap.
    func admit(_ transfer: Transfer, bytes: Int) -> Bool {
        if capApplies(to: transfer) {
            let now = ContinuousClock.now
            guard bandwidth.take(bytes, now: now) else {
                transfer.throttle.pause(now: now)
                throttled.append(transfer)
                counters.throttled += 1
                return false
            }
        }
        transfer.throttle.took(bytes)
        return true
    }

    /// Resumes held-back transfers while the bucket has tokens (or the cap no longer applies to
    /// them): on-demand ones first (under `max-rate-applies-to = "all"` someone is waiting for
    /// them), then the longest waiting. A resumed transfer is offered its bytes again from inside
    /// the resume and may pause anew, behind those still waiting. A transfer newly held back is
    /// first handed to the engine's own time limits.
    func releaseThrottled(now: ContinuousClock.Instant) {
        guard !throttled.isEmpty else { return }
        let waiting = throttled.filter { $0.job.priority == .onDemand } + throttled.filter { $0.job.priority != .onDemand }
        throttled = []
        var stillWaiting: [Transfer] = []
        for transfer in waiting {
            // A transfer that ended meanwhile was taken off the list; this is only a guard.
            guard running[transfer.easy.handle] === transfer, transfer.throttle.isPaused else { continue }
            govern(transfer)
            if capApplies(to: transfer), !bandwidth.hasTokens(now: .now) {
                stillWaiting.append(transfer)
                continue
            }
            transfer.throttle.resume(now: .now)
            // Waiting for room too: the cache's answer resumes it.
            if case .waiting = transfer.room { continue }
            transfer.easy.resumeReceiving()
        }
        throttled = stillWaiting + throttled
    }

    /// Turns off libcurl's low-speed check and overall timeout on a transfer held back by the cap
    /// (both count the time it is paused); ``judgeThrottled(_:now:)`` applies them instead.
    private func govern(_ transfer: Transfer) {
        guard !transfer.throttle.isGoverned else { return }
        transfer.throttle.isGoverned = true
        try? transfer.easy.set(CURLOPT_LOW_SPEED_LIMIT, 0)
        try? transfer.easy.set(CURLOPT_LOW_SPEED_TIME, 0)
        try? transfer.easy.set(CURLOPT_TIMEOUT_MS, 0)
    }

    /// Takes an ending transfer off the held-back list, so that nothing resumes its handle.
    func forgetThrottled(_ transfer: Transfer) {
        guard transfer.throttle.isPaused else { return }
        throttled.removeAll { $0 === transfer }
    }

    /// Why a governed transfer has failed the limits libcurl no longer checks for it, or nil.
    func judgeThrottled(_ transfer: Transfer, now: ContinuousClock.Instant) -> String? {
        guard transfer.throttle.isGoverned else { return nil }
        return transfer.throttle.limitReached(
            startedAt: transfer.startedAt, now: now, timeout: transfer.totalTimeout,
            lowSpeedLimit: policy.lowSpeedLimit, lowSpeedTime: policy.lowSpeedTime)
    }

    /// Milliseconds until the bucket lets a held-back transfer go on; nil when none waits.
    func throttleTimeout(now: ContinuousClock.Instant) -> Int? {
        guard !throttled.isEmpty else { return nil }
        return max(1, bandwidth.waitForTokens(now: now).milliseconds + 1)
    }
}
