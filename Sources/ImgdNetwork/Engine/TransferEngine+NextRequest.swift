import CCurlShim
import ImgdCore

/// A transfer that ended may not end its attempt: the tier failed and the origin is asked
/// directly, or the answer was a redirect to follow. Either is another request in the slot just
/// freed (a redirect's, once its target's host may take it: ``follow(_:to:redirects:attemptStartedAt:)``),
/// or a refusal that fails the attempt. The tier (``tierStep(after:result:)``) and the
/// redirects (``redirectStep(after:result:)``) each decide; this is where the decision is taken.
extension TransferEngine {
    /// What follows a finished transfer, before it is concluded as an answer.
    enum NextRequest {
        /// The tier failed: the same request to the origin directly, in the same attempt (not
        /// a retry). `cause` says why, in a few words that are the same for every URL
        /// (`502 upstream`, `no answer (connect)`).
        case direct(cause: String)
        /// A redirect: fetch this target next, as the same attempt.
        case follow(ImageURL)
        /// The next request may not be made (the tier refused the request, the redirect is not
        /// allowed): the attempt fails with this.
        case refuse(DownloadError)
    }

    /// The next request after `transfer`, or nil when its outcome is an answer to conclude. The
    /// tier's failures are looked at first: a redirect is followed only if the tier did not fail.
    func nextRequest(after transfer: Transfer, result: CURLcode) -> NextRequest? {
        tierStep(after: transfer, result: result) ?? redirectStep(after: transfer, result: result)
    }

    /// Takes `next` for the job of `transfer`, whose handle goes now.
    func take(_ next: NextRequest, after transfer: Transfer) {
        let job = transfer.job
        transfer.discard()
        switch next {
        case .direct(let cause):
            // It has the attempt's whole time again (the tier may have spent it timing out).
            counters.tierFallbacks += 1
            if let tier = transfer.tier { onTierFallback?(tier.base, cause) }
            launch(job, target: transfer.target, redirects: transfer.redirects, direct: true)
        case .follow(let target):
            follow(job, to: target, redirects: transfer.redirects + 1, attemptStartedAt: transfer.startedAt)
        case .refuse(let error):
            settle(job, .failure(error))
        }
    }
}
