import ImgdCore

/// What a prefetch run has done so far, shared by the list tasks that update it and the
/// progress line and summary that read it (a mutex guards the counts).
final class PrefetchTally: Sendable {
    struct Counts {
        /// URLs read from the lists (bad lines excluded).
        var listed = 0
        var downloaded = 0
        var downloadedBytes = 0
        var alreadyCached = 0
        /// Failures by code (`http_404`, `not_image`, … and `bad_url` for bad lines).
        var failures: [String: Int] = [:]

        var failed: Int { failures.values.reduce(0, +) }
        var finished: Int { downloaded + alreadyCached + failed - failures[FailureCode.badURL.rawValue, default: 0] }
    }

    private let counts = Locked(Counts())

    var snapshot: Counts { counts.withLock { $0 } }

    func update(_ change: (inout Counts) -> Void) {
        counts.withLock { change(&$0) }
    }
}
