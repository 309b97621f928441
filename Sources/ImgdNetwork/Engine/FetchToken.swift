import ImgdCore
import Synchronization

/// One caller's wait for one URL: carries the request into the engine and the result back.
///
/// Shared between the waiting task and the engine thread; the mutex guards the continuation and
/// whether the wait was cancelled or answered, so the continuation is resumed exactly once,
/// whichever of "result", "cancel" or "engine stopped" comes first.
final class FetchToken: Sendable {
    typealias Outcome = Result<CachedImage, DownloadError>

    private struct State {
        var continuation: CheckedContinuation<Outcome, Never>?
        var isCancelled = false
        var isAnswered = false
    }

    let url: ImageURL
    let key: CacheKey
    let priority: FetchPriority
    let submitter: SubmitterID
    private let state = Mutex(State())

    init(url: ImageURL, priority: FetchPriority, submitter: SubmitterID) {
        self.url = url
        self.key = url.cacheKey
        self.priority = priority
        self.submitter = submitter
    }

    /// Stores the continuation to resume. If the wait was cancelled before it began, answers
    /// `cancelled` at once and returns false: the engine need not hear of it.
    func attach(_ continuation: CheckedContinuation<Outcome, Never>) -> Bool {
        let attached: Bool = state.withLock { state in
            if state.isCancelled {
                state.isAnswered = true
                return false
            }
            state.continuation = continuation
            return true
        }
        if !attached { continuation.resume(returning: .failure(.cancelled)) }
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
        let continuation: CheckedContinuation<Outcome, Never>? = state.withLock { state in
            guard !state.isAnswered else { return nil }
            state.isAnswered = true
            defer { state.continuation = nil }
            return state.continuation
        }
        continuation?.resume(returning: outcome)
    }
}
