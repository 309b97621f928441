import Synchronization

/// The requests a ``Downloader`` holds: one per URL handed to its engine (by `fetch` or
/// `prefetch`) and not answered yet — queued, running, publishing or waiting for a retry,
/// coalesced with another or not. Each costs memory (its token, its handler, its share of a
/// job) until it is answered, so this is what a bound on held work has to count.
///
/// One atomic count: a bounded request costs one compare-and-swap, never a walk over what is
/// queued. Every ``FetchToken`` made with a count gives its one back exactly once, when it is
/// answered (result, cancel, or the engine stopping).
final class HeldRequests: Sendable {
    private let count = Atomic<Int>(0)

    /// Requests held now.
    var value: Int { count.load(ordering: .relaxed) }

    /// Takes `requests` more, if the count then stays at most `limit` (nil: no limit); returns
    /// false, and takes nothing, when it would not.
    func take(_ requests: Int, limit: Int?) -> Bool {
        guard let limit else {
            count.add(requests, ordering: .relaxed)
            return true
        }
        var current = count.load(ordering: .relaxed)
        while true {
            guard current + requests <= limit else { return false }
            let (exchanged, original) = count.compareExchange(
                expected: current, desired: current + requests, ordering: .relaxed)
            if exchanged { return true }
            current = original
        }
    }

    /// Gives one back (a token was answered).
    func release() {
        count.subtract(1, ordering: .relaxed)
    }
}
