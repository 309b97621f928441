import CCurlShim
import ImgdCore

/// Requests sent through a shared tier (``TierRoute``): telling the tier's own failures from the
/// origin's answers it passes on. The tier marks every answer it makes itself with
/// `X-Tier-Error: <reason>` and strips that header from the origin's, so an answer without it is
/// the origin's and is handled as if it had come directly.
extension TransferEngine {
    /// The header a tier marks its own answers with.
    static let tierErrorHeader = "X-Tier-Error"
    /// The marks of a tier that could not reach the origin (`upstream`: no answer, a timeout)
    /// or failed itself (`internal`): the only answers a fallback may step around, and only with
    /// a 5xx status. Every other mark is a refusal (`denied`, `denied-address`: its deny list or
    /// its egress firewall; `bad-request`, `method`): going to the origin directly would go
    /// around the tier's policy, so it is never done.
    static let tierOutageMarks: Set<String> = ["upstream", "internal"]

    /// The step after `transfer`, sent through the tier, when the tier failed: ask the origin
    /// directly (``NextRequest/direct(cause:)``), or fail the attempt when the tier refused the
    /// request (see ``tierOutageMarks``; the origin is not asked). Nil when its outcome is the
    /// origin's, or a tier failure while falling back is off: then it is an ordinary failure,
    /// retried if transient.
    func tierStep(after transfer: Transfer, result: CURLcode) -> NextRequest? {
        guard let tier = transfer.tier else { return nil }
        // Our own reasons for stopping (too large, not an image, a refused address) are ours.
        guard transfer.abort == nil else { return nil }
        let easy = transfer.easy
        let status = easy.info(long: CURLINFO_RESPONSE_CODE) ?? 0
        if status >= 400, let marker = easy.header(Self.tierErrorHeader) {
            let reason = "\(status) \(EchoedText.cut(marker, limit: 64))"
            // libcurl hands the value without surrounding blanks.
            let mark = marker.lowercased()
            guard status >= 500, Self.tierOutageMarks.contains(mark) else {
                return .refuse(.policyDenied("the tier \(tier.base) refused the request: \(reason)"))
            }
            return tier.fallback ? .direct(cause: reason) : nil
        }
        // No answer from the tier itself (its name, a connection, TLS with it, a timeout), or a
        // timeout once it answered: the origin may well answer. (The tier sends nothing before
        // the origin's answer, so an origin that stalls looks like this too, as it does when the
        // tier gives up on it with a 504 upstream: a fallback either way, under imgd's own
        // address policy.)
        let tierSilent = status == 0 && result != CURLE_OK && result != CURLE_WRITE_ERROR
        guard tierSilent || result == CURLE_OPERATION_TIMEDOUT else { return nil }
        guard tier.fallback else { return nil }
        let error = FailureClassifier.classify(
            result, detail: transfer.errorDetail, bytesReceived: transfer.bytesReceived, responseStatus: status,
            maxRedirects: policy.maxRedirects)
        return .direct(cause: "no answer (\(error.code))")
    }
}
