import CCurlShim
import ImgdCore

/// Redirects, taken by the engine rather than libcurl: each hop's target is resolved against
/// the URL that was requested, checked (scheme, count, address policy) and fetched on a fresh
/// handle as part of the same attempt. Keeping the hop here is what lets the next request go
/// elsewhere than libcurl would send it (through a tier), carry what only its own host should
/// see, and count against its own host: a hop takes a slot of its target's host (the redirecting
/// host's was freed with its response), waits for that host's `rate` and `Retry-After`, and a
/// `Retry-After` in its answer holds that host.
extension TransferEngine {
    /// The statuses whose `Location` is followed: 301, 302, 303, 307 and 308. Not 300 (a
    /// choice for a person), not 304 (an answer to a conditional request, whatever it carries).
    static let redirectStatuses: Set<Int> = [301, 302, 303, 307, 308]

    /// The hop to take after `transfer` (``NextRequest/follow(_:)``, or
    /// ``NextRequest/refuse(_:)`` when the redirect may not be followed), or nil when its
    /// response is not a redirect to follow (not a redirect status, no `Location`, or the
    /// request itself failed): it is then concluded as any other. A redirect whose `Location` libcurl cannot parse is concluded as
    /// its status (`http_302`), as one without a `Location` is.
    func redirectStep(after transfer: Transfer, result: CURLcode) -> NextRequest? {
        let easy = transfer.easy
        // A 3xx body is counted and dropped; past its limit the write callback ends the transfer
        // with a write error, which is still a complete answer.
        guard transfer.abort == nil, result == CURLE_OK || result == CURLE_WRITE_ERROR,
            let status = easy.info(long: CURLINFO_RESPONSE_CODE), Self.redirectStatuses.contains(status),
            let location = easy.header("Location"), !location.isEmpty,
            let resolved = CurlURL.resolve(location, against: transfer.target.normalized)
        else { return nil }
        guard transfer.redirects < policy.maxRedirects else {
            return .refuse(.tooManyRedirects(limit: policy.maxRedirects))
        }
        let target: ImageURL
        do throws(ImageURLError) {
            target = try ImageURL(resolved)
        } catch .unsupportedScheme(let scheme) {
            return .refuse(.policyDenied(
                "only http and https are allowed (a redirect to another scheme?): the redirect to \(EchoedText.cut(resolved, limit: 200)) is refused (scheme \(EchoedText.cut(scheme, limit: 64)))"))
        } catch {
            return nil
        }
        if let reason = policy.addresses.requestRefusal(url: target.normalized, host: target.host, isRedirect: true) {
            return .refuse(.policyDenied(reason))
        }
        return .follow(target)
    }

    /// Takes a redirect's hop to `target`: at once, in the slot the redirect's response freed,
    /// when `target`'s host may take a request now (under its cap, not held by its `rate` or a
    /// `Retry-After`) and the global cap allows it (a reload may have lowered it); otherwise the
    /// job goes back to the front of its list's queue with the hop pending, and starts with it
    /// when that host may, as a job queued for that host would (``start(_:)``). It keeps its
    /// waiters, its attempt, its place, and the attempt's time, less the wait.
    func follow(_ job: Job, to target: ImageURL, redirects: Int, attemptStartedAt: ContinuousClock.Instant) {
        let now = ContinuousClock.now
        let hop = Job.Hop(target: target, redirects: redirects, attemptStartedAt: attemptStartedAt, queuedAt: now)
        if running.count < policy.maxParallel, hostCanStart(target, now: now) {
            launch(job, hop: hop, now: now)
            return
        }
        job.pendingHop = hop
        move(job, to: .queued)
        queue.enqueueFirst(job, priority: job.priority, submitter: job.submitter)
    }

    /// Starts `hop`'s request for `job`, charging its target's host's `rate`.
    func launch(_ job: Job, hop: Job.Hop, now: ContinuousClock.Instant) {
        // The attempt's clock stops while the hop waits for its host: a queued job's has not
        // started either.
        let startedAt = hop.attemptStartedAt + (now - hop.queuedAt)
        guard launch(job, target: hop.target, redirects: hop.redirects, attemptStartedAt: startedAt) else { return }
        chargeRate(of: hop.target)
    }
}
