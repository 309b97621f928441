import ImgdCore
import ImgdNetwork

/// Counts the outcomes of one `refresh` as they arrive (on the downloader's thread) and lets
/// the command wait until it has them all. The mutex guards the counts and the expected total.
final class RefreshTally: Sendable {
    struct Counts: Sendable {
        var revalidated = 0
        var replaced = 0
        var failed = 0
        var total: Int { revalidated + replaced + failed }
    }

    private struct State {
        var counts = Counts()
        var expected: Int?
    }

    private let state = Locked(State())
    private let done = Promise<Counts>()

    /// One outcome: a success from disk is a `304`, from the network a new body.
    func record(_ result: Result<CachedImage, DownloadError>) {
        let finished: Counts? = state.withLock { state in
            switch result {
            case .success(let image) where image.source == .disk: state.counts.revalidated += 1
            case .success: state.counts.replaced += 1
            case .failure: state.counts.failed += 1
            }
            guard let expected = state.expected, state.counts.total >= expected else { return nil }
            return state.counts
        }
        if let finished { _ = done.fulfill(finished) }
    }

    /// The counts once `expected` outcomes have arrived (some may have before the call).
    func wait(for expected: Int) async -> Counts {
        let finished: Counts? = state.withLock { state in
            state.expected = expected
            return state.counts.total >= expected ? state.counts : nil
        }
        if let finished { _ = done.fulfill(finished) }
        return await done.value
    }
}
