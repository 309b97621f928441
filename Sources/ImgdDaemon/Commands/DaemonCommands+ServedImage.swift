import ImgdCore
import ImgdNetwork
import ImgdStore

#if canImport(Glibc)
import Glibc
#endif

/// An image the HTTP face sends: its row, and the bytes the row describes (the memory tier's
/// copy, or the entry's file opened so that file and row agree: an `ETag` that is its SHA-256).
struct ServedImage: Sendable {
    enum Body: Sendable {
        case memory([UInt8])
        /// Open; the receiver closes it.
        case file(OpenedEntryFile)
    }

    let entry: IndexEntry
    let body: Body
    let source: CacheSource
    /// The rule that decides when the entry is due (the request's, else the daemon's), and
    /// `min-fresh`: what `Cache-Control` tells a cache downstream.
    let refresh: RefreshRule
    let minFresh: Duration
}

extension DaemonCommands {
    /// `get`'s memory-tier answer for the HTTP face, on the event loop: counted as a get and a
    /// hit; nil, and nothing counted, on a miss.
    func memoryImage() throws(ControlError) -> ServedImage? {
        let arguments = try getArguments()
        guard let answer = try cachedHit(tier: .memory, arguments: arguments), let bytes = answer.hit.bytes else { return nil }
        return served(answer.hit.entry.entry, .memory(bytes), source: .memory, request: arguments.image)
    }

    /// `get`'s answer past the memory tier for the HTTP face: the entry's file opened and
    /// verified against its row (``DiskCache/openVerified(_:)``), from the disk tier, else
    /// (unless `fetch` is false) downloaded first. The counters, the revalidation of a due entry
    /// and the outcome of a download are those of `get`.
    func openedImage(fetch: Bool) async throws(ControlError) -> ServedImage {
        let image = try getArguments().image
        if let found = await openVerified(image) {
            services.disk.index.recordAccess(image.key, at: WallClock.nowMilliseconds())
            services.downloader.revalidateIfDue(image, entry: found.entry.entry)
            services.counters.update { counters in
                counters.gets += 1
                counters.diskHits += 1
            }
            // A small image is kept in memory, as a control `get` keeps it: the next request is
            // answered on the event loop.
            if let bytes = services.tiers.keepInMemory(found.entry, from: found.file.descriptor) {
                Glibc.close(found.file.descriptor)
                return served(found.entry.entry, .memory(bytes), source: .disk, request: image)
            }
            return served(found.entry.entry, .file(found.file), source: .disk, request: image)
        }
        countMiss()
        guard fetch else { throw .notFound("\(image.url.normalized) is not cached (fetch: false)") }
        let fetched = try await fetchNow(image)
        guard let found = await openVerified(image) else { throw Self.goneAgain(image.url) }
        return served(found.entry.entry, .file(found.file), source: fetched.source == .network ? .network : .disk, request: image)
    }

    /// The entry's file and row for `image` when both agree and have the digest it asks for;
    /// a key being published is asked again once the publisher has settled. The caller owns the
    /// descriptor.
    func openVerified(_ image: ImageRequest) async -> (file: OpenedEntryFile, entry: CachedEntry)? {
        for _ in 0..<3 {
            switch services.disk.openVerified(image.key) {
            case .opened(let file, let found):
                guard image.expectedSHA256 == nil || image.expectedSHA256 == found.entry.sha256 else {
                    Glibc.close(file.descriptor)
                    return nil
                }
                return (file, found)
            case .missing:
                return nil
            case .publishing:
                await services.downloader.settlePublishing()
            }
        }
        return nil
    }

    private func served(_ entry: IndexEntry, _ body: ServedImage.Body, source: CacheSource, request image: ImageRequest) -> ServedImage {
        let policy = services.downloader.refreshPolicy
        return ServedImage(entry: entry, body: body, source: source, refresh: image.refresh ?? policy.rule, minFresh: policy.minFresh)
    }
}
