import ImgdCore

/// The requests a ``Downloader`` holds: one per URL handed to its engine (by `fetch` or
/// `prefetch`) and not answered yet — queued, running, publishing or waiting for a retry,
/// coalesced with another or not. Each costs memory (its token, its URL, its handler, its share
/// of a job) until it is answered, so this is what a bound on held work has to count: how many,
/// and the bytes of their URLs (a URL may be 8 KiB: 100,000 of them are ~800 MB, which a count
/// alone would let through).
///
/// Every ``FetchToken`` made with a count gives its share back exactly once, when it is
/// answered (result, cancel, or the engine stopping).
final class HeldRequests: Sendable {
    private struct Counts {
        var requests = 0
        var bytes = 0
    }

    /// Guards the two counts, so a bounded request takes both or neither: one short lock per
    /// request (or per `prefetch` of many), never a walk over what is queued.
    private let counts = Locked(Counts())

    /// Requests held now.
    var value: Int { counts.withLock { $0.requests } }
    /// Bytes of their URLs.
    var bytes: Int { counts.withLock { $0.bytes } }

    /// What one request for `url` counts against the byte budget: its URL's bytes.
    static func bytes(of url: ImageURL) -> Int { url.normalized.utf8.count }

    /// Takes `requests` more of `bytes` in all, if both counts then stay within `limit` (nil:
    /// no limit); returns false, and takes nothing, when they would not.
    func take(_ requests: Int, bytes: Int, limit: HeldRequestLimit?) -> Bool {
        counts.withLock { counts in
            if let limit {
                guard counts.requests + requests <= limit.requests, counts.bytes + bytes <= limit.bytes else { return false }
            }
            counts.requests += requests
            counts.bytes += bytes
            return true
        }
    }

    /// Gives one back (a token was answered), with its `bytes`.
    func release(bytes: Int) {
        counts.withLock { counts in
            counts.requests -= 1
            counts.bytes -= bytes
        }
    }
}
