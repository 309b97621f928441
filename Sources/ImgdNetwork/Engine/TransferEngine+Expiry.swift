import ImgdCore

/// Signed URLs that expire (``URLExpiry``): one past its expiry is never requested, a retry that
/// would start after it is not made, and a 403 its origin gives at or after it is reported as
/// `url_expired`, which the dropper cures by re-signing (never remembered against the key).
///
/// The clock is the system's (``URLExpiry/now()``): the origin judges the signature by its own,
/// NTP-kept clock, which the system clock follows and this run's steady clock may not.
extension TransferEngine {
    /// Called as `job` is about to start its next attempt: when its URL has expired meanwhile
    /// (it waited in the queue, or for a retry), a waiter of the same key and host whose URL has
    /// not (a re-signed one that joined it) takes its place; else the job ends `url_expired`,
    /// without a request. Returns true when it ended.
    func refuseIfExpired(_ job: Job) -> Bool {
        guard let expiry = job.expiry else { return false }
        let now = URLExpiry.now()
        guard expiry.isExpired(at: now) else { return false }
        for waiter in job.waiters where waiter.url != job.url && waiter.url.hostKey == job.url.hostKey {
            let other = URLExpiry(waiter.url)
            guard other.map({ !$0.isExpired(at: now) }) ?? true else { continue }
            job.url = waiter.url
            job.expiry = other
            return false
        }
        finish(job, .failure(.urlExpired(expiry)))
        return true
    }

    /// Whether `job`'s URL will have expired by the time a retry `delay` from now starts: the
    /// retry is then pointless, and the job ends `url_expired` instead (``refuseIfExpired(_:)``
    /// would refuse it then anyway, after a wait).
    func retryOutlivesURL(_ job: Job, delay: Duration) -> Bool {
        guard let expiry = job.expiry else { return false }
        let delayMilliseconds = Int(delay.components.seconds) * 1000 + Int(delay.components.attoseconds / 1_000_000_000_000_000)
        guard expiry.isExpired(at: URLExpiry.now() + delayMilliseconds) else { return false }
        finish(job, .failure(.urlExpired(expiry)))
        return true
    }

    /// `arrival`, with a 403 for a URL at or past its expiry read as `url_expired` (no skew
    /// margin: a 403 even a second before the expiry is the origin's own refusal and stays
    /// `http_403`).
    func expiring(_ arrival: Result<ArrivedBody, DownloadError>, of job: Job) -> Result<ArrivedBody, DownloadError> {
        guard case .failure(.http(403, _)) = arrival, let expiry = job.expiry, expiry.isExpired(at: URLExpiry.now()) else {
            return arrival
        }
        return .failure(.urlExpired(expiry, status: 403))
    }
}
