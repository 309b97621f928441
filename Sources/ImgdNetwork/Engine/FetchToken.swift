import ImgdCore

/// One request for one URL: carries it into the engine and its result back, exactly once.
///
/// The result goes either to a waiting task (a continuation, for ``Downloader/fetch(_:priority:submitter:)``)
/// or to a handler called on the engine thread (for ``Downloader/prefetch(_:submitter:priority:limit:handler:)``,
/// where a thread hop per URL would cost more than the transfer of a small image).
/// The mutex guards the continuation and whether the request was cancelled or answered, so
/// whichever of "result", "cancel" or "engine stopped" comes first wins, and only once.
final class FetchToken: Sendable {
    typealias Outcome = Result<CachedImage, DownloadError>
    typealias Handler = @Sendable (ImageURL, Outcome) -> Void

    private struct State {
        var continuation: CheckedContinuation<Outcome, Never>?
        var isCancelled = false
        var isAnswered = false
    }

    let url: ImageURL
    let key: CacheKey
    let priority: FetchPriority
    let submitter: SubmitterID
    private let handler: Handler?
    /// The count this request was taken from; given back once, when it is answered.
    private let held: HeldRequests?
    private let state = Locked(State())

    init(url: ImageURL, priority: FetchPriority, submitter: SubmitterID, held: HeldRequests? = nil, handler: Handler? = nil) {
        self.url = url
        self.key = url.cacheKey
        self.priority = priority
        self.submitter = submitter
        self.held = held
        self.handler = handler
    }

    /// Stores the continuation to resume. If the wait was cancelled before it began, answers
    /// `cancelled` at once and returns false: the engine need not hear of it. The engine may
    /// already have answered the cancel (before there was a continuation to resume): the
    /// continuation is resumed here all the same, but the count is given back only by whichever
    /// marked the request answered first.
    func attach(_ continuation: CheckedContinuation<Outcome, Never>) -> Bool {
        let (attached, answersNow): (Bool, Bool) = state.withLock { state in
            if state.isCancelled {
                defer { state.isAnswered = true }
                return (false, !state.isAnswered)
            }
            state.continuation = continuation
            return (true, false)
        }
        if !attached {
            if answersNow { held?.release(bytes: HeldRequests.bytes(of: url)) }
            continuation.resume(returning: .failure(.cancelled))
        }
        return attached
    }

    /// Marks the wait cancelled; true if it was still open (the engine must be told).
    func cancel() -> Bool {
        state.withLock { state in
            guard !state.isAnswered, !state.isCancelled else { return false }
            state.isCancelled = true
            return true
        }
    }

    var isCancelled: Bool { state.withLock { $0.isCancelled } }

    /// Delivers the result (once; later calls do nothing).
    func answer(_ outcome: Outcome) {
        let (isFirst, continuation): (Bool, CheckedContinuation<Outcome, Never>?) = state.withLock { state in
            guard !state.isAnswered else { return (false, nil) }
            state.isAnswered = true
            defer { state.continuation = nil }
            return (true, state.continuation)
        }
        guard isFirst else { return }
        held?.release(bytes: HeldRequests.bytes(of: url))
        if let handler { handler(url, outcome) } else { continuation?.resume(returning: outcome) }
    }
}
