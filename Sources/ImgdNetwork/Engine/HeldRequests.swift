import ImgdCore

/// The requests a ``Downloader`` holds: one per URL handed to its engine (by `fetch` or
/// `prefetch`) and not answered yet — queued, running, publishing or waiting for a retry,
/// coalesced with another or not. Each costs memory (its token, its URL, its handler, its share
/// of a job) until it is answered, so this is what a bound on held work has to count: how many,
/// and the bytes of their URLs (a URL may be 8 KiB: 100,000 of them are ~800 MB, which a count
/// alone would let through). Requests taken for a caller (a uid) are also counted per caller,
/// for the callers' shares (``HeldRequestLimit/callerRequests``).
///
/// Every ``FetchToken`` made with a count gives its share back exactly once, when it is
/// answered (result, cancel, or the engine stopping).
final class HeldRequests: Sendable {
    private struct Counts {
        var requests = 0
        var bytes = 0
        /// Per caller, only callers holding something (an entry goes when it falls to zero).
        var callers: [UInt32: (requests: Int, bytes: Int)] = [:]
    }

    /// Guards the counts, so a bounded request takes all of them or none: one short lock per
    /// request (or per `prefetch` of many), never a walk over what is queued.
    private let counts = Locked(Counts())

    /// Requests held now.
    var value: Int { counts.withLock { $0.requests } }
    /// Bytes of their URLs.
    var bytes: Int { counts.withLock { $0.bytes } }

    /// Requests and bytes held now for `caller`.
    func held(by caller: UInt32) -> (requests: Int, bytes: Int) {
        counts.withLock { $0.callers[caller] ?? (0, 0) }
    }

    /// What one request for `url` counts against the byte budget: its URL's bytes.
    static func bytes(of url: ImageURL) -> Int { url.normalized.utf8.count }

    /// Takes `requests` more of `bytes` in all, if the counts then stay within `limit` (nil: no
    /// limit) — for `caller`, when given, its own counts within the limit's caller share too;
    /// returns false, and takes nothing, when they would not.
    func take(_ requests: Int, bytes: Int, limit: HeldRequestLimit?, caller: UInt32? = nil) -> Bool {
        counts.withLock { counts in
            let mine = caller.flatMap { counts.callers[$0] } ?? (0, 0)
            if let limit {
                guard limit.admits(requests, bytes: bytes, held: (counts.requests, counts.bytes)) else { return false }
                if caller != nil, !limit.admitsCaller(requests, bytes: bytes, held: mine) { return false }
            }
            counts.requests += requests
            counts.bytes += bytes
            if let caller { counts.callers[caller] = (mine.requests + requests, mine.bytes + bytes) }
            return true
        }
    }

    /// Gives one back (a token was answered), with its `bytes`, and from `caller`'s counts when
    /// it was taken for one.
    func release(bytes: Int, caller: UInt32? = nil) {
        counts.withLock { counts in
            counts.requests -= 1
            counts.bytes -= bytes
            guard let caller, let mine = counts.callers[caller] else { return }
            counts.callers[caller] = mine.requests > 1 ? (mine.requests - 1, mine.bytes - bytes) : nil
        }
    }
}
