import ImgdCore
import ImgdNetwork
import Logging
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Warms the ready lists (`ready-lists`) at every start and feeds ``ReadinessTracker``.
///
/// Each list is read where it is (``ReadyListFile``: never moved or written), one after the
/// other, as a stream (``LinkListReader``, any of the spool's formats), within the spool's
/// `max-list-bytes` and `max-list-lines`. Its URLs go to the downloader at list priority in
/// slices, at most ``ReadyWindow/limit`` outstanding; an entry already cached is answered from
/// the index at once, so a restart with the hot set on disk is ready within a read of the lists.
/// An item's chosen `key` is in imgd's own namespace (the lists are the configuration's), and
/// its `sha256`, `priority` and `refresh` apply; `pin` does not (drop a list in the spool to pin).
///
/// Not the spool: a ready list is not recorded in the state database, has no report and does
/// not show in `lists` (`status.ready` shows its progress), so that a hot set of a million
/// lines is not copied into the database at every start, and a list kept in place is never
/// mistaken for one to move to `done/`.
///
/// An actor on its own serial queue (`imgd.ready`): reading a list blocks on the file.
actor ReadyListWarmer {
    private let paths: [String]
    private let tracker: ReadinessTracker
    private let downloader: Downloader
    private let limits: SpoolLimits
    private let logger: Logger
    /// Every outcome is counted and published as the spool's are (`fetched`, `failed`).
    private let onOutcome: @Sendable (ImageURL, Result<CachedImage, DownloadError>) -> Void
    private let window: ReadyWindow
    private let submitter: SubmitterID
    private nonisolated let executor = QueueExecutor(label: "imgd.ready")
    /// Set by ``stop()``: the reading gives up before its next read.
    private nonisolated let stopRequested = Atomic<Bool>(false)

    nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

    /// URLs outstanding at most: the spool's full window (512), or a quarter of `max-queued`.
    static func windowLimit(maxQueued: Int) -> Int { max(1, min(WarmingLimits.fullWindow, maxQueued / 4)) }

    init(
        paths: [String], tracker: ReadinessTracker, downloader: Downloader, limits: SpoolLimits, maxQueued: Int, logger: Logger,
        onOutcome: @escaping @Sendable (ImageURL, Result<CachedImage, DownloadError>) -> Void
    ) {
        self.paths = paths
        self.tracker = tracker
        self.downloader = downloader
        self.limits = limits
        self.logger = logger
        self.onOutcome = onOutcome
        window = ReadyWindow(limit: Self.windowLimit(maxQueued: maxQueued))
        submitter = downloader.makeSubmitter()
    }

    /// Stops warming: the reading gives up, the URLs outstanding are withdrawn.
    nonisolated func stop() {
        stopRequested.store(true, ordering: .relaxed)
        window.stop()
        downloader.cancel(submitter: submitter)
    }

    private nonisolated var isStopping: Bool { stopRequested.load(ordering: .relaxed) }

    /// Reads and warms every ready list, in the order given; returns when all are read (their
    /// URLs may still be outstanding) or at a stop.
    func warmAll() async {
        if !paths.isEmpty { logger.info("warming \(paths.count) ready list\(paths.count == 1 ? "" : "s")") }
        for (index, path) in paths.enumerated() {
            guard !isStopping else { return }
            await warm(index, path)
        }
    }

    private func warm(_ index: Int, _ path: String) async {
        let file: ReadyListFile
        do {
            file = try ReadyListFile.open(path, maxBytes: limits.maxListBytes)
        } catch {
            refuse(index, path, "\(error)")
            return
        }
        var reader: LinkListReader
        do {
            reader = try LinkListReader(
                fileDescriptor: file.descriptor, path: path, byteLimit: file.size, isInterrupted: { [self] in isStopping })
        } catch {
            refuse(index, path, "\(error)")
            return
        }
        let slice = max(1, window.limit / 4)
        var entries = 0
        var ended = false
        while !ended {
            var requests: [ImageRequest] = []
            var bad = 0
            do {
                while requests.count < slice {
                    guard let entry = try reader.next() else {
                        ended = true
                        break
                    }
                    entries += 1
                    guard entries <= limits.maxListLines else {
                        // The rest of the list is one failure, as for the spool's lists.
                        logger.warning("ready list \(path): more than max-list-lines (\(limits.maxListLines)) entries; the rest is one failure")
                        bad += 1
                        ended = true
                        break
                    }
                    switch entry.url {
                    case .success(let url):
                        var request = downloader.request(
                            for: url, chosenKey: entry.options.key, owner: geteuid(), sha256: entry.options.sha256)
                        if entry.options.isHighPriority { request.priority = .onDemand }
                        request.refresh = entry.options.refresh ?? reader.refresh
                        requests.append(request)
                    case .failure(let error):
                        logger.warning("ready list \(path):\(entry.line): not a URL (\(error)); counted as failed")
                        bad += 1
                    }
                }
            } catch .interrupted {
                return  // stopping
            } catch .malformed(_, let line, let reason) {
                logger.warning("ready list \(path):\(line): malformed (\(reason)); what came before is warmed, the rest is one failure")
                bad += 1
                ended = true
            } catch {
                tracker.read(index, count: requests.count + bad)
                refuse(index, path, "\(error)")
                return
            }
            tracker.read(index, count: requests.count + bad)
            for _ in 0..<bad { tracker.answered(index, cached: false) }
            guard !requests.isEmpty else { continue }
            guard await window.take(requests.count) else { return }
            let (tracker, window, onOutcome) = (tracker, window, onOutcome)
            downloader.prefetch(requests, submitter: submitter) { url, result in
                window.give()
                switch result {
                case .success: tracker.answered(index, cached: true)
                case .failure: tracker.answered(index, cached: false)
                }
                onOutcome(url, result)
            }
        }
        tracker.finishedReading(index)
        logger.info("ready list \(path) read: \(entries) entries")
    }

    private func refuse(_ index: Int, _ path: String, _ reason: String) {
        tracker.missing(index, reason: reason)
        logger.error("ready list \(path) refused: \(reason); imgd will not become ready (status.ready, wait-ready) in this run")
    }
}
