import Dispatch
import Foundation
import ImgdCore
import ImgdNetwork
import ImgdStore
import Logging

#if canImport(Glibc)
import Glibc
#endif

/// The spool: claims the link lists dropped into it, warms the cache with their URLs, and
/// reports on each when it is done.
///
/// - **Claiming** (see ``SpoolWatcher`` for when a name is noticed) is ``ListClaimer``'s, on its
///   own queue: the list's URLs go into the state database (``ListStore``), its file to
///   `.claimed/`, and then the list is handed here. A claim that did not complete (a crash, a
///   stop) is dropped at the next start, and its file, still in the spool, claimed anew.
/// - **Warming**: each list feeds the downloader a window of URLs at a time, read from the
///   database in list order; each list is its own submitter, so lists take turns (a huge list
///   cannot starve a small one) and on-demand `get`s go before all of them. Outcomes are written
///   back in batches (every 100 ms or 1,000 outcomes).
/// - **Finishing**: when no URL is pending, the list's report (`NAME.report.json`,
///   ``ListReportWriter``, written as a stream) is written and the file moved to `done/` (all
///   cached) or `failed/` (any failure or cancelled). Then ``ListPruner``, on its own queue,
///   drops the lists beyond the last 100 finished from the database.
///
/// `@unchecked Sendable`: every mutable property is touched only on `queue`, a serial queue
/// (the service's own thread of control); the downloader's answers hop onto it in batches
/// (`answers`, behind its mutex). Claims run on the claimer's queue, so a long one holds up
/// none of this.
public final class SpoolService: @unchecked Sendable {
    /// URLs of one list handed to the downloader and not yet answered, at most.
    static let window = 512
    /// Outcomes written in one transaction, at most; and how long one waits to be written.
    static let flushCount = 1000
    static let flushDelay = DispatchTimeInterval.milliseconds(100)

    private let folders: SpoolFolders
    private let reports: ListReportWriter
    private let pruner: ListPruner
    /// Set once, at the end of `init` (its callback needs `self`).
    private var claimer: ListClaimer!
    private let store: ListStore
    private let downloader: Downloader
    private let disk: DiskCache
    private let logger: Logger
    private let onEvent: @Sendable (SpoolEvent) -> Void
    private let queue = DispatchQueue(label: "imgd.spool")
    private var watcher: SpoolWatcher?
    /// Answers from the downloader, which calls back on its transfer thread, waiting for the
    /// queue: they are handed over in batches — one hop for all that arrived while the queue was
    /// busy — not one hop (and often one thread wake-up) per URL.
    private let answers = Locked<[(list: Int, url: ImageURL, result: Result<CachedImage, DownloadError>)]>([])

    // Owned by `queue`:
    private var runs: [Int: ListRun] = [:]
    private var outcomes: [(list: Int, seq: Int, outcome: ListURLOutcome)] = []
    private var pins: [(key: CacheKey, until: Int)] = []
    private var flushScheduled = false
    private var stopping = false

    /// A list being warmed.
    private struct ListRun {
        let id: Int
        let name: String
        let submitter: SubmitterID
        let pinMilliseconds: Int?
        /// The last seq read from the database; the next read starts after it.
        var cursor = 0
        /// Seqs handed to the downloader, by normalised URL (a URL may appear twice in a list).
        var inFlight: [String: [Int]] = [:]
        var outstanding = 0
        /// True once every pending URL has been read.
        var exhausted = false
        var cancelled = false
    }

    /// Opens the spool at `path` (creating its folders) and the state database at `store`.
    public init(
        path: String, store: ListStore, limits: SpoolLimits = SpoolLimits(), downloader: Downloader, disk: DiskCache,
        logger: Logger, onEvent: @escaping @Sendable (SpoolEvent) -> Void
    ) throws(SpoolError) {
        folders = try SpoolFolders(path: path, logger: logger)
        reports = ListReportWriter(folders: folders, store: store, logger: logger)
        pruner = ListPruner(store: store, logger: logger)
        self.store = store
        self.downloader = downloader
        self.disk = disk
        self.logger = logger
        self.onEvent = onEvent
        claimer = ListClaimer(
            folders: folders, store: store, reports: reports, pruner: pruner, limits: limits, logger: logger, onEvent: onEvent,
            onClaimed: { [unowned self] record, cancelled in queue.async { self.claimed(record, cancelled: cancelled) } })
    }

    /// Resumes the lists a previous run left, then starts watching (taking what is already in the spool).
    public func start() throws(SpoolError) {
        let claimer = claimer!
        let watcher = SpoolWatcher(folder: folders.path) { name in claimer.claim(name) }
        // Before the watcher starts: the half-made claims of the last run are dropped before
        // their files are claimed anew.
        queue.sync {
            resume()
            self.watcher = watcher
        }
        // What the last run left to prune (abandoned claims included), off the start path.
        pruner.schedule()
        try watcher.start()
    }

    /// Stops taking lists and writes every outcome received; lists in progress stay active in the
    /// database and resume at the next start. Call before the downloader shuts down: the
    /// cancellations that follow are not recorded as failures.
    public func stop() {
        let watcher = queue.sync {
            stopping = true
            return self.watcher
        }
        watcher?.stop()
        claimer.stop()
        pruner.stop()
        queue.sync { flush() }
    }

    /// Writes what the downloader's shutdown answered (nothing is recorded as failed by it).
    public func finalFlush() {
        queue.sync { flush() }
    }

    // MARK: - Commands

    /// Applies new limits (a reload) to the claims that start after this.
    public func update(limits: SpoolLimits) {
        claimer.update(limits: limits)
    }

    /// Cancels the list in progress named `name` — one being warmed, or one still being claimed
    /// (its claim stops; what was read is failed as cancelled) — if `mayCancel` allows it for the
    /// uid that owned the list's file (nil: not recorded).
    public func cancel(list name: String, if mayCancel: @escaping @Sendable (_ owner: UInt32?) -> Bool = { _ in true }) async
        -> ListCancellation
    {
        let warming = await cancelRun(named: name, if: mayCancel)
        guard warming == .notFound else { return warming }
        let claiming = await claimer.cancel(named: name, if: mayCancel)
        guard claiming == .notFound else { return claiming }
        // Claimed between the two looks: the claimer hands a list over before it forgets it.
        return await cancelRun(named: name, if: mayCancel)
    }

    private func cancelRun(named name: String, if mayCancel: @escaping @Sendable (_ owner: UInt32?) -> Bool) async
        -> ListCancellation
    {
        await onQueue { [self] in
            guard let id = runs.values.first(where: { $0.name == name })?.id else { return .notFound }
            let owner = try? store.owner(ofList: id)
            guard mayCancel(owner) else { return .forbidden(owner: owner) }
            runs[id]!.cancelled = true
            runs[id]!.exhausted = true
            flush()
            let pending = (try? store.failPending(list: id, code: FailureCode.cancelled.rawValue, message: "the list was cancelled")) ?? 0
            downloader.cancel(submitter: runs[id]!.submitter)
            finishIfDone(id)
            return .cancelled(pending: pending)
        }
    }

    /// Puts the failed URLs of the list named `name` back in the queue (a finished list is
    /// taken back from `failed/`). Returns how many, or nil when there is no such list.
    public func retry(list name: String) async -> Int? {
        await onQueue { [self] in
            flush()
            guard let record = (try? store.lists(finishedLimit: 1000))?.first(where: { $0.name == name }) else { return nil }
            // The downloader would answer these URLs from its failure memory again: forget their
            // failures first (theirs only — what other lists and clients failed stays remembered).
            var after = 0
            while let page = try? store.failures(list: record.id, after: after, limit: 1000), let last = page.last {
                // Keys from the stored (normalised) URLs: no URL parse per failure on this queue.
                downloader.forgetFailures(of: page.map { CacheKey(normalizedURL: $0.failure.url) })
                after = last.seq
            }
            let requeued: Int
            do {
                // Retired by the pruner since the lookup: as if it had not been found (its file
                // stays in failed/, no run is made for a list the database no longer has).
                guard let count = try store.requeueFailures(list: record.id) else { return nil }
                requeued = count
            } catch {
                requeued = 0
            }
            guard requeued > 0 else { return 0 }
            if var run = runs[record.id] {
                run.cursor = 0
                run.exhausted = false
                run.cancelled = false
                runs[record.id] = run
            } else {
                // Finished: bring its file back into `.claimed/` (its old report goes). Its own file:
                // another list of the same name may have finished since, under the dropped name.
                let stem = record.finishedFile ?? SpoolEntryName.fileName(for: record.name)
                _ = folders.move(stem, from: folders.failed, to: folders.claimed, as: record.claimedFile)
                unlinkat(folders.failed, stem + ".report.json", 0)
                runs[record.id] = ListRun(
                    id: record.id, name: record.name, submitter: downloader.makeSubmitter(),
                    pinMilliseconds: record.pinMilliseconds)
            }
            pump()
            return requeued
        }
    }

    /// The lists: in progress, then the last finished ones, most recent first. Read from the
    /// database, not the spool's queue (which may be busy claiming a long list): counts can lag
    /// the last 100 ms of outcomes.
    public func lists() -> [ListRecord] {
        (try? store.lists()) ?? []
    }

    /// One page of the failures of the list named `name` (after `seq`, at most `limit`, each
    /// with its seq), or nil when there is no such list.
    public func failures(list name: String, afterSeq seq: Int, limit: Int) -> [(seq: Int, failure: ListFailure)]? {
        guard let record = (try? store.lists(finishedLimit: 1000))?.first(where: { $0.name == name }) else { return nil }
        return (try? store.failures(list: record.id, after: seq, limit: limit)) ?? []
    }

    /// Lists in progress, and their URLs settled and in all (for the status line).
    public var progress: (lists: Int, settled: Int, total: Int) {
        let active = ((try? store.lists(finishedLimit: 0)) ?? []).filter { !$0.state.isFinished }
        return (active.count, active.reduce(0) { $0 + $1.total - $1.pending }, active.reduce(0) { $0 + $1.total })
    }

    /// True once the spool's queue has run everything submitted before (the watchdog's probe).
    public func respond() async {
        await onQueue {}
    }

    /// Runs `body` on the spool's queue and returns its result, without blocking a thread of the
    /// cooperative pool while the queue is busy.
    private func onQueue<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            queue.async { continuation.resume(returning: body()) }
        }
    }

    // MARK: - Claiming

    private func resume() {
        for record in (try? store.lists(finishedLimit: 0)) ?? [] {
            switch record.state {
            case .claiming:
                var info = stat()
                if fstatat(folders.claimed, record.claimedFile, &info, AT_SYMLINK_NOFOLLOW) == 0 {
                    // Killed between the move's link and its unlink: the spool still has the
                    // file under its dropped name, which would be refused as a hard link.
                    if info.st_nlink > 1 { removeSpoolLinks(to: info) }
                    try? store.finishClaim(list: record.id)
                    startRun(record)
                } else {
                    // Crashed while recording: the file is still in the spool; claim it anew.
                    try? store.abandonClaim(list: record.id)
                }
            case .active:
                startRun(record)
            default:
                break
            }
        }
        if !runs.isEmpty { logger.info("resuming \(runs.count) list(s) claimed before the last stop") }
        pump()
    }

    /// Removes the names in the spool folder itself that are `file` (same device and inode):
    /// what a claim's move to `.claimed/` left when a kill came between its link and its unlink.
    private func removeSpoolLinks(to file: stat) {
        guard let handle = opendir(folders.path) else { return }
        defer { closedir(handle) }
        var names: [SpoolEntryName] = []
        while let entry = readdir(handle) {
            // The name's bytes as they are: a name that is not UTF-8 is still a name.
            names.append(withUnsafeBytes(of: entry.pointee.d_name) { SpoolEntryName(bytes: $0.prefix { $0 != 0 }) })
        }
        for name in names {
            var info = stat()
            guard name.withCString({ fstatat(folders.spool, $0, &info, AT_SYMLINK_NOFOLLOW) }) == 0,
                (info.st_mode & S_IFMT) == S_IFREG, info.st_dev == file.st_dev, info.st_ino == file.st_ino
            else { continue }
            _ = name.withCString { unlinkat(folders.spool, $0, 0) }
            logger.info(
                "removed \(name.display) from the spool: a claim that a kill interrupted had moved it to .claimed/ already",
                metadata: ["list": "\(name.display)"])
        }
    }

    /// On the queue: a list the claimer has moved to `.claimed/` starts warming, or, when it was
    /// cancelled while being claimed, finishes at once.
    private func claimed(_ record: ListRecord, cancelled: Bool) {
        guard !stopping else { return }  // active in the database: it resumes at the next start
        startRun(record, cancelled: cancelled)
        pump()
    }

    // MARK: - Warming

    private func startRun(_ record: ListRecord, cancelled: Bool = false) {
        runs[record.id] = ListRun(
            id: record.id, name: record.name, submitter: downloader.makeSubmitter(), pinMilliseconds: record.pinMilliseconds,
            exhausted: cancelled, cancelled: cancelled)
        finishIfDone(record.id)
    }

    /// Tops up every list's window, in turn.
    private func pump() {
        guard !stopping else { return }
        for id in runs.keys.sorted() {
            guard var run = runs[id], !run.exhausted, !run.cancelled else { continue }
            let room = Self.window - run.outstanding
            guard room >= Self.window / 4 else { continue }  // refill in batches, not one by one
            let rows = (try? store.pendingURLs(list: id, after: run.cursor, limit: room)) ?? []
            guard let last = rows.last else {
                run.exhausted = true
                runs[id] = run
                finishIfDone(id)
                continue
            }
            run.cursor = last.seq
            var urls: [ImageURL] = []
            for row in rows {
                guard let url = try? ImageURL(row.url) else {
                    outcomes.append((id, row.seq, .failed(code: FailureCode.badURL.rawValue, message: "not a URL: \(row.url)")))
                    continue
                }
                urls.append(url)
                run.inFlight[url.normalized, default: []].append(row.seq)
            }
            run.outstanding += urls.count
            runs[id] = run
            guard !urls.isEmpty else {
                // Every row read was unusable (and is now recorded as failed): no answer will come
                // to pump again, so read on (or find the list finished) on the next turn.
                queue.async { [self] in pump() }
                continue
            }
            downloader.prefetch(urls, submitter: run.submitter) { [self] url, result in
                let isFirst = answers.withLock { waiting in
                    waiting.append((id, url, result))
                    return waiting.count == 1
                }
                if isFirst { queue.async { self.takeAnswers() } }
            }
        }
        scheduleFlush()
    }

    /// On the queue: answers everything the downloader has handed over since the last time.
    private func takeAnswers() {
        let batch = answers.withLock { waiting in
            var taken: [(list: Int, url: ImageURL, result: Result<CachedImage, DownloadError>)] = []
            swap(&taken, &waiting)
            return taken
        }
        for answer in batch { answered(list: answer.list, url: answer.url, result: answer.result) }
    }

    private func answered(list id: Int, url: ImageURL, result: Result<CachedImage, DownloadError>) {
        // In place (`runs[id]!`): a copy of the run, changed and stored back, would copy its
        // in-flight table (up to `window` URLs) for every answer.
        guard let seq = runs[id]?.inFlight[url.normalized]?.first else { return }
        runs[id]!.inFlight[url.normalized]!.removeFirst()
        if runs[id]!.inFlight[url.normalized]!.isEmpty { runs[id]!.inFlight[url.normalized] = nil }
        runs[id]!.outstanding -= 1
        let run = runs[id]!
        switch result {
        case .success(let image):
            outcomes.append((id, seq, image.source == .network ? .cached(bytes: image.bytes) : .alreadyCached(bytes: image.bytes)))
            if let pin = run.pinMilliseconds { pins.append((image.key, WallClock.nowMilliseconds() + pin)) }
            if image.source == .network, let download = image.download {
                onEvent(.fetched(url: url.normalized, bytes: image.bytes, format: download.image.format.rawValue))
            }
        case .failure(.cancelled) where stopping:
            return  // shutting down: the URL stays pending and is fetched after the restart
        case .failure(let error):
            outcomes.append((id, seq, .failed(code: error.code, message: error.message)))
            onEvent(.failed(url: url.normalized, code: error.code, message: error.message))
        }
        if outcomes.count >= Self.flushCount { flush() } else { scheduleFlush() }
        if run.outstanding <= Self.window * 3 / 4 { pump() }
        finishIfDone(id)
    }

    private func scheduleFlush() {
        guard !flushScheduled, !outcomes.isEmpty || !pins.isEmpty else { return }
        flushScheduled = true
        queue.asyncAfter(deadline: .now() + Self.flushDelay) { [self] in
            flushScheduled = false
            flush()
        }
    }

    private func flush() {
        guard !outcomes.isEmpty || !pins.isEmpty else { return }
        do {
            try store.record(outcomes)
            outcomes.removeAll(keepingCapacity: true)
        } catch {
            logger.error("cannot record list progress (will try again): \(error)")
        }
        for pin in pins { try? disk.index.pin(pin.key, until: pin.until) }
        pins.removeAll()
    }

    // MARK: - Finishing

    private func finishIfDone(_ id: Int) {
        guard let run = runs[id], run.exhausted, run.outstanding == 0, !stopping else { return }
        flush()
        guard var record = try? store.list(id) else { return }
        guard record.pending == 0 else {
            // Outcomes not recorded yet (a write failed): look again after the next flush.
            return
        }
        record.state = run.cancelled ? .cancelled : (record.failed > 0 ? .failed : .done)
        record.finishedAt = WallClock.nowMilliseconds()
        let destination = record.state == .done ? folders.done : folders.failed
        // Named after the list, within NAME_MAX with its report's suffix (a long name is
        // shortened), numbered when a finished list has that name there. The name is recorded
        // before the move: after a kill between the move and the report, the file is no longer
        // in `.claimed/`, and the report must go beside this list's file, not replace the
        // report of the list that has the unnumbered name. (`retry` forgets the name a list
        // had: it finishes again under the first free one.)
        let fileName: String
        if let chosen = record.finishedFile {
            fileName = chosen
        } else {
            fileName = folders.freeName(for: SpoolEntryName.fileName(for: record.name), in: destination)
            try? store.setFinishedFile(list: id, file: fileName)
        }
        let moved = folders.move(record.claimedFile, from: folders.claimed, to: destination, as: fileName) ?? fileName
        reports.writeReport(for: record, as: moved, in: destination)
        try? store.finish(list: id, state: record.state, at: record.finishedAt!, file: moved)
        // Lists beyond the kept ones leave the database, off this queue.
        pruner.schedule()
        runs[id] = nil
        logger.info(
            "list \(record.name) \(record.state.rawValue): \(record.cached) cached, \(record.alreadyCached) already cached, \(record.failed) failed",
            metadata: ["list": "\(record.name)"])
        onEvent(.listDone(record))
    }
}
