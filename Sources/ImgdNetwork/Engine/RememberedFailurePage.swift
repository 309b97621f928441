import HeapModule

/// One page of the downloader's remembered failures, in URL order: the failures after a given
/// URL, at most a given number, and whether more follow. Pages keep a `failed` reply small
/// however many failures are remembered; the URL is the cursor, so a failure that expires or
/// is added between two pages moves no other one.
public struct RememberedFailurePage: Sendable {
    public let failures: [(url: String, error: DownloadError)]
    /// True when failures after the last one of this page remain.
    public let hasMore: Bool

    /// The `limit` smallest URLs of `all` that sort after `after` (all of them when nil), in
    /// order: one pass with a heap of `limit + 1`, so O(n log limit) on the engine's thread and
    /// no copy of the whole memory.
    init(of all: some Sequence<(url: String, error: DownloadError)>, after: String?, limit: Int) {
        precondition(limit > 0)
        var smallest = Heap<Entry>()
        for failure in all {
            if let after, failure.url <= after { continue }
            if smallest.count > limit {
                guard failure.url < smallest.max!.url else { continue }
                smallest.replaceMax(with: Entry(url: failure.url, error: failure.error))
            } else {
                smallest.insert(Entry(url: failure.url, error: failure.error))
            }
        }
        var ordered: [(url: String, error: DownloadError)] = []
        ordered.reserveCapacity(smallest.count)
        while let entry = smallest.popMin() { ordered.append((entry.url, entry.error)) }
        hasMore = ordered.count > limit
        failures = Array(ordered.prefix(limit))
    }

    private struct Entry: Comparable {
        let url: String
        let error: DownloadError
        static func < (lhs: Entry, rhs: Entry) -> Bool { lhs.url < rhs.url }
        static func == (lhs: Entry, rhs: Entry) -> Bool { lhs.url == rhs.url }
    }
}
