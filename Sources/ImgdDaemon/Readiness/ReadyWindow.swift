import ImgdCore

/// The ready lists' URLs handed to the downloader and not yet answered, at most ``limit``: what
/// bounds their memory however long the hot set is. The warmer takes room before each slice
/// (waiting when there is none) and every answer gives one back, on the downloader's thread.
final class ReadyWindow: Sendable {
    let limit: Int
    private struct State {
        var outstanding = 0
        /// The warmer waiting for room, woken when half the window is free (or at a stop).
        var waiting: Promise<Void>?
        var stopped = false
    }

    /// Written by the warmer (taking) and the downloader's thread (giving back).
    private let state = Locked(State())

    init(limit: Int) {
        self.limit = max(1, limit)
    }

    /// Takes room for `count` URLs, waiting until there is (always at once when none is
    /// outstanding); false once stopped.
    func take(_ count: Int) async -> Bool {
        while true {
            let wait: Promise<Void>?? = state.withLock { state in
                if state.stopped { return .some(nil) }
                if state.outstanding == 0 || state.outstanding + count <= limit {
                    state.outstanding += count
                    return nil
                }
                let promise = Promise<Void>()
                state.waiting = promise
                return promise
            }
            switch wait {
            case .none: return true
            case .some(.none): return false
            case .some(.some(let promise)): await promise.value
            }
        }
    }

    /// One URL was answered.
    func give() {
        let woken = state.withLock { state -> Promise<Void>? in
            state.outstanding -= 1
            guard state.outstanding <= limit / 2 else { return nil }
            defer { state.waiting = nil }
            return state.waiting
        }
        woken?.fulfill(())
    }

    /// Wakes the warmer for good: ``take(_:)`` answers false from now on.
    func stop() {
        let woken = state.withLock { state -> Promise<Void>? in
            state.stopped = true
            defer { state.waiting = nil }
            return state.waiting
        }
        woken?.fulfill(())
    }
}
