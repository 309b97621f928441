import ImgdCore

/// One request for one URL: carries it into the engine and its result back, exactly once (or,
/// for a revalidation of a due entry that adds nothing, ends it unanswered: ``withdraw()``).
///
/// The result goes either to a waiting task (a ``Promise``, for ``Downloader/fetch(_:priority:submitter:)``)
/// or to a handler called on the engine thread (for ``Downloader/prefetch(_:submitter:priority:limit:handler:)``,
/// where a thread hop per URL would cost more than the transfer of a small image).
/// The mutex guards whether the request was cancelled or answered, so whichever of "result",
/// "cancel" or "engine stopped" comes first wins, and only once.
final class FetchToken: Sendable {
    typealias Outcome = Result<CachedImage, DownloadError>
    typealias Handler = @Sendable (ImageURL, Outcome) -> Void

    private struct State {
        var isCancelled = false
        var isAnswered = false
    }

    let url: ImageURL
    let key: CacheKey
    /// The digest this request wants its body to have, if any.
    let expectedSHA256: SHA256Digest?
    /// The request's own mirrors (an item's `mirrors`), tried after ``url``.
    let mirrors: [ImageURL]
    /// Set for a document fetch (``Downloader/fetchDocument(_:limit:submitter:caller:handler:)``):
    /// the most bytes its body may have.
    let documentLimit: Int?
    let priority: FetchPriority
    /// Set for a revalidation of a cached entry (``Validators``).
    let validators: Validators?
    /// Set for the revalidation of an entry that was due when used (and was served): nobody
    /// waits on it for its own sake. The engine withdraws it unanswered when it would add
    /// nothing: a revalidation or fetch of its key is already under way (that one's outcome is
    /// told), or a failure of its key is remembered (told when it happened).
    let isDueRevalidation: Bool
    let submitter: SubmitterID
    /// The uid it was asked for (a client's, or the owner of the list it is an item of); nil for
    /// the daemon's own (a due entry's revalidation). `cancel` by URL of a member stops only
    /// that member's requests.
    let caller: UInt32?
    /// Whether ``held`` counts it in ``caller``'s share too.
    private let countedForCaller: Bool
    private let handler: Handler?
    /// Where a waiting task finds the result (none with a handler).
    private let result: Promise<Outcome>?
    /// The count this request was taken from; given back once, when it is answered or withdrawn.
    private let held: HeldRequests?
    private let state = Locked(State())

    init(
        request: ImageRequest, priority: FetchPriority, submitter: SubmitterID, held: HeldRequests? = nil,
        handler: Handler? = nil, validators: Validators? = nil, isDueRevalidation: Bool = false,
        caller: UInt32? = nil, countedForCaller: Bool = false, documentLimit: Int? = nil
    ) {
        self.documentLimit = documentLimit
        precondition(!countedForCaller || (caller != nil && held != nil), "a share is counted for a caller in a count")
        precondition(!isDueRevalidation || handler != nil, "a request someone waits on cannot be withdrawn")
        self.validators = validators
        self.isDueRevalidation = isDueRevalidation
        self.url = request.url
        self.key = request.key
        self.expectedSHA256 = request.expectedSHA256
        self.mirrors = request.mirrors
        self.priority = priority
        self.submitter = submitter
        self.held = held
        self.caller = caller
        self.countedForCaller = countedForCaller
        self.handler = handler
        result = handler == nil ? Promise() : nil
    }

    /// A request for `url` under its own key.
    convenience init(url: ImageURL, priority: FetchPriority, submitter: SubmitterID, held: HeldRequests? = nil, handler: Handler? = nil) {
        self.init(request: ImageRequest(url: url), priority: priority, submitter: submitter, held: held, handler: handler)
    }

    /// Called by the waiting task before the request goes to the engine. If the wait was
    /// cancelled before it began, answers `cancelled` at once and returns false: the engine need
    /// not hear of it. (The engine may already have answered the cancel: then this answer is
    /// ignored, and the count was given back by that one.)
    func beginWaiting() -> Bool {
        guard isCancelled else { return true }
        answer(.failure(.cancelled))
        return false
    }

    /// The result, once answered (for a request made without a handler).
    var outcome: Outcome {
        get async {
            guard let result else { preconditionFailure("a request with a handler has no result to wait for") }
            return await result.value
        }
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
        guard close() else { return }
        if let handler { handler(url, outcome) } else { result?.fulfill(outcome) }
    }

    /// Ends a request without calling its handler (``isDueRevalidation``): its count is given
    /// back, and a later answer does nothing.
    func withdraw() {
        _ = close()
    }

    /// Marks the request answered and gives its count back; false if it already was.
    private func close() -> Bool {
        let isFirst: Bool = state.withLock { state in
            guard !state.isAnswered else { return false }
            state.isAnswered = true
            return true
        }
        if isFirst { held?.release(bytes: HeldRequests.bytes(of: url), caller: countedForCaller ? caller : nil) }
        return isFirst
    }
}
