import Dispatch
import ImgdCore
import ImgdNetwork
import ImgdProtocol
import ImgdStore

#if canImport(Glibc)
import Glibc
#endif

/// Sitemaps: the children of a sitemap index, fetched through the downloader as documents and
/// read into the same list as its own entries, within the list's bounds.
extension ListClaimer {
    /// The most bytes one fetched sitemap may have, whatever `max-list-bytes` leaves: the
    /// sitemap protocol's own limit (50 MB uncompressed). A child is held in memory while it
    /// is read.
    static let maxSitemapBytes = 50 * 1024 * 1024

    /// What reading a list's sitemaps has found: the bounds they share, and the counts its report
    /// gives. One per claim.
    struct SitemapWalk {
        let maxDepth: Int
        let maxChildren: Int
        /// What `max-list-bytes` leaves for children: it bounds the list's file and every
        /// sitemap read for it together.
        var bytesLeft: Int
        let maxListBytes: Int
        /// The uid the list's file belongs to: its children are fetched for it.
        let owner: UInt32
        let submitter: SubmitterID
        /// What the list's file is (nil: not a sitemap).
        var kind: SitemapKind?
        /// The children read, in order (their URLs are kept in the report).
        var fetched: [String] = []
        /// Children whose fetch or reading failed, each a `bad_list` line naming it.
        var failed = 0
        /// Children not fetched: past `sitemap-max-children`, too deep, a cycle, named twice.
        var notRead = 0
        /// Page locations skipped because they are not images, in the list and its children.
        var skippedPages = 0
        /// The children being read, outermost first: a child naming one of them is a cycle.
        var ancestors: [String] = []
        /// Every child asked for so far.
        var visited: Set<String> = []
        /// Whether the line saying that `sitemap-max-children` was reached has been written.
        var saidTooMany = false

        /// Why the child at `url`, `depth` levels below the list, is not read; nil when it is.
        /// `say` is false for a refusal already explained by an earlier line.
        mutating func refusal(of url: String, depth: Int) -> (reason: String, say: Bool)? {
            if ancestors.contains(url) {
                return ("a cycle: it names a sitemap it is itself read from", true)
            }
            if visited.contains(url) {
                return ("it is named twice (read once)", true)
            }
            if depth > maxDepth {
                return ("it is \(depth) levels below the list, deeper than sitemap-max-depth (\(maxDepth))", true)
            }
            if visited.count >= maxChildren {
                defer { saidTooMany = true }
                return ("the list names more than sitemap-max-children (\(maxChildren)) sitemaps; the rest are not read", !saidTooMany)
            }
            if bytesLeft <= 0 {
                return ("max-list-bytes (\(ByteCount(maxListBytes))) is used up by the list and the sitemaps read before it", true)
            }
            return nil
        }

        /// The summary kept with the list for its report (nil for a list that is not a sitemap).
        var summary: String? {
            guard let kind else { return nil }
            return JSONValue.object([
                "kind": .string(kind.rawValue),
                "children_fetched": JSONValue(fetched.count),
                "children_failed": JSONValue(failed),
                "children_not_read": JSONValue(notRead),
                "non_image_locations_skipped": JSONValue(skippedPages),
                "children": JSONValue(fetched),
            ]).jsonText
        }
    }

    /// How waiting for a document ended.
    enum DocumentWait {
        case fetched([UInt8])
        case failed(DownloadError)
        case stopped
        case cancelled
    }

    /// Fetches the sitemap at `url` for `walk`'s owner and waits for it on the claimer's queue,
    /// asking every 50 ms whether the claimer is stopping or the claim cancelled (then the fetch
    /// is withdrawn).
    func waitForDocument(_ url: ImageURL, limit: Int, walk: SitemapWalk) -> DocumentWait {
        let answer = Locked<Result<[UInt8], DownloadError>?>(nil)
        let arrived = DispatchSemaphore(value: 0)
        let fetch = downloader.fetchDocument(url, limit: limit, submitter: walk.submitter, caller: walk.owner) { result in
            answer.withLock { $0 = result }
            arrived.signal()
        }
        while arrived.wait(timeout: .now() + .milliseconds(50)) == .timedOut {
            if isStopping || isCancelled {
                fetch.cancel()
                arrived.wait()
                return isStopping ? .stopped : .cancelled
            }
        }
        switch answer.withLock({ $0 }) {
        case .success(let body)?: return .fetched(body)
        case .failure(let error)?: return .failed(error)
        case nil: return .failed(.cancelled)
        }
    }

    /// A compressed sitemap dropped in the spool, inflated, or why it cannot be.
    enum InflatedSitemap {
        case xml([UInt8])
        case refused(String)
    }

    /// A compressed sitemap dropped in the spool (`NAME.xml.gz`, or `NAME.xml` whose bytes are
    /// gzip): read whole (it is at most `max-list-bytes`) and inflated in memory, to at most
    /// `limit` bytes. Nil when the file is not one (it is read as a stream, as any list).
    nonisolated static func inflatedSitemap(_ fd: Int32, name: String, size: Int, limit: Int) -> InflatedSitemap? {
        let lowered = name.lowercased()
        guard lowered.hasSuffix(".xml") || lowered.hasSuffix(".xml.gz") else { return nil }
        var magic: [UInt8] = [0, 0]
        guard pread(fd, &magic, 2, 0) == 2, GzipInflater.isGzip(magic) else {
            return lowered.hasSuffix(".gz") ? .refused("its name ends in .gz but it is not gzip-compressed") : nil
        }
        var compressed = [UInt8](repeating: 0, count: size)
        var done = 0
        while done < size {
            let got = retryingOnInterrupt {
                compressed.withUnsafeMutableBytes { pread(fd, $0.baseAddress! + done, size - done, off_t(done)) }
            }
            guard got > 0 else {
                return .refused("it cannot be read: \(got < 0 ? String(cString: strerror(errno)) : "it is shorter than when claimed")")
            }
            done += got
        }
        switch GzipInflater.inflate(compressed, limit: limit) {
        case .success(let bytes): return .xml(bytes)
        case .failure(let failure): return .refused("the compressed sitemap cannot be read: \(failure)")
        }
    }

    /// What a child's failed fetch says in the report.
    static func childFailure(_ url: String, _ error: DownloadError, limit: Int) -> String {
        if case .tooLarge = error {
            return "sitemap \(url) not read: too large: more than \(ByteCount(limit)) (what max-list-bytes leaves, at most \(ByteCount(maxSitemapBytes)) a sitemap)"
        }
        return "sitemap \(url) could not be fetched (\(error.failureCode.rawValue)): \(error)"
    }
}
