import Dispatch
import Foundation
import ImgdCore
import ImgdNetwork
import ImgdStore
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The spool: claims the link lists dropped into it, warms the cache with their URLs, and
/// reports on each when it is done.
///
/// - **Claiming** (see ``SpoolWatcher`` for when a name is noticed): the file is opened with
///   `O_NOFOLLOW` (a symlink, FIFO or folder is refused and moved to `failed/` with a report
///   saying why), its URLs are streamed into the state database (``ListStore``) in slices, and
///   only then is it moved to `.claimed/`. A crash before the move leaves the file in the spool
///   and the half-made claim is dropped at start; after the move the list resumes.
/// - **Warming**: each list feeds the downloader a window of URLs at a time, read from the
///   database in list order; each list is its own submitter, so lists take turns (a huge list
///   cannot starve a small one) and on-demand `get`s go before all of them. Outcomes are written
///   back in batches (every 100 ms or 1,000 outcomes).
/// - **Finishing**: when no URL is pending, the list's report (`NAME.report.json`) is written
///   and the file moved to `done/` (all cached) or `failed/` (any failure or cancelled).
///
/// `@unchecked Sendable`: every mutable property is touched only on `queue`, a serial queue
/// (the service's own thread of control); the downloader's answers hop onto it in batches
/// (`answers`, behind its mutex).
public final class SpoolService: @unchecked Sendable {
    /// URLs of one list handed to the downloader and not yet answered, at most.
    static let window = 512
    /// Outcomes written in one transaction, at most; and how long one waits to be written.
    static let flushCount = 1000
    static let flushDelay = DispatchTimeInterval.milliseconds(100)

    private let folders: SpoolFolders
    private let store: ListStore
    private let downloader: Downloader
    private let disk: DiskCache
    private let log: DaemonLog
    private let onEvent: @Sendable (SpoolEvent) -> Void
    private let queue = DispatchQueue(label: "imgd.spool")
    private var watcher: SpoolWatcher?
    /// Set by ``stop()`` before it waits for the queue, which may be busy claiming a long list:
    /// the claim looks at it between slices and gives up, so a stop is not held up by it.
    private let stopRequested = Atomic<Bool>(false)
    /// Answers from the downloader, which calls back on its transfer thread, waiting for the
    /// queue: they are handed over in batches — one hop for all that arrived while the queue was
    /// busy — not one hop (and often one thread wake-up) per URL.
    private let answers = Mutex<[(list: Int, url: ImageURL, result: Result<CachedImage, DownloadError>)]>([])

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
        path: String, store: ListStore, downloader: Downloader, disk: DiskCache, log: DaemonLog,
        onEvent: @escaping @Sendable (SpoolEvent) -> Void
    ) throws(SpoolError) {
        folders = try SpoolFolders(path: path)
        self.store = store
        self.downloader = downloader
        self.disk = disk
        self.log = log
        self.onEvent = onEvent
    }

    /// Resumes the lists a previous run left, then starts watching (taking what is already in the spool).
    public func start() throws(SpoolError) {
        let watcher = SpoolWatcher(folder: folders.path) { [self] name in queue.async { self.claim(name) } }
        queue.sync {
            resume()
            self.watcher = watcher
        }
        // Not on the queue after this: the claims the first listing queues there may be long,
        // and the daemon is ready before they end.
        try watcher.start()
    }

    /// Stops taking lists and writes every outcome received; lists in progress stay active in the
    /// database and resume at the next start. Call before the downloader shuts down: the
    /// cancellations that follow are not recorded as failures.
    public func stop() {
        stopRequested.store(true, ordering: .relaxed)
        let watcher = queue.sync {
            stopping = true
            return self.watcher
        }
        watcher?.stop()
        queue.sync { flush() }
    }

    /// Writes what the downloader's shutdown answered (nothing is recorded as failed by it).
    public func finalFlush() {
        queue.sync { flush() }
    }

    // MARK: - Commands

    /// Cancels the list in progress named `name`. Returns how many URLs were still pending, or
    /// nil when no list in progress has that name.
    public func cancel(list name: String) async -> Int? {
        await onQueue { [self] in
            guard let id = runs.values.first(where: { $0.name == name })?.id else { return nil }
            runs[id]!.cancelled = true
            runs[id]!.exhausted = true
            flush()
            let pending = (try? store.failPending(list: id, code: "cancelled", message: "the list was cancelled")) ?? 0
            downloader.cancel(submitter: runs[id]!.submitter)
            finishIfDone(id)
            return pending
        }
    }

    /// Puts the failed URLs of the list named `name` back in the queue (a finished list is
    /// taken back from `failed/`). Returns how many, or nil when there is no such list.
    public func retry(list name: String) async -> Int? {
        await onQueue { [self] in
            flush()
            guard let record = (try? store.lists(finishedLimit: 1000))?.first(where: { $0.name == name }) else { return nil }
            let requeued = (try? store.requeueFailures(list: record.id)) ?? 0
            guard requeued > 0 else { return 0 }
            if var run = runs[record.id] {
                run.cursor = 0
                run.exhausted = false
                run.cancelled = false
                runs[record.id] = run
            } else {
                // Finished: bring its file back into `.claimed/` (its old report goes). Its own file:
                // another list of the same name may have finished since, under the dropped name.
                let stem = record.finishedFile ?? record.name
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
        return (try? store.failures(list: record.id, afterSeq: seq, limit: limit)) ?? []
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
        if !runs.isEmpty { log("resuming \(runs.count) list(s) claimed before the last stop") }
        pump()
    }

    private func claim(_ name: String) {
        guard !stopping, !stopRequested.load(ordering: .relaxed), !SpoolWatcher.isIgnored(name) else { return }
        let fd = openat(folders.spool, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        if fd < 0 {
            switch errno {
            case ENOENT: return  // claimed already (a name can be reported twice) or removed
            case ELOOP: refuse(name, "it is a symbolic link; link lists must be regular files")
            case ENXIO: refuse(name, "it is a socket; link lists must be regular files")
            default: refuse(name, "it cannot be opened: \(String(cString: strerror(errno)))")
            }
            return
        }
        var info = stat()
        fstat(fd, &info)
        guard (info.st_mode & S_IFMT) == S_IFREG else {
            close(fd)
            refuse(name, "it is \(Self.kind(info.st_mode)); link lists must be regular files")
            return
        }
        let path = folders.path + "/" + name
        var reader: LinkListReader
        do {
            reader = try LinkListReader(fileDescriptor: fd, path: path)
        } catch {
            refuse(name, "\(error)")
            return
        }
        let record: ListRecord
        do {
            record = try store.beginClaim(
                fileName: name, format: reader.format.rawValue, pinMilliseconds: nil, at: WallClock.nowMilliseconds())
        } catch {
            log("cannot record list \(name), leaving it in the spool: \(error)", level: .error)
            return
        }
        var total = 0
        let complete: Bool
        do {
            complete = try recordLines(&reader, list: record.id, total: &total)
        } catch {
            log("cannot record list \(name), leaving it in the spool: \(error)", level: .error)
            try? store.abandonClaim(list: record.id)
            return
        }
        guard complete else {
            // Stopping: the file stays in the spool; the next start drops the half-made claim
            // (see `resume()`) and claims the file anew.
            log("stopping: list \(name) left in the spool, to be claimed at the next start")
            return
        }
        guard folders.move(name, from: folders.spool, to: folders.claimed, as: record.claimedFile) != nil else {
            log("cannot move list \(name) to .claimed/: \(String(cString: strerror(errno))); leaving it", level: .error)
            try? store.abandonClaim(list: record.id)
            return
        }
        try? store.finishClaim(list: record.id)
        log("claimed list \(record.name): \(total) lines")
        onEvent(.listClaimed(name: record.name, total: total))
        guard let claimed = try? store.list(record.id) else { return }
        startRun(claimed)
        pump()
    }

    /// Streams the list's lines into the database in slices; a list that breaks its syntax part
    /// way keeps what came before, plus a `bad_list` line saying where and why. Returns false
    /// when it gave up part way because the spool is stopping.
    private func recordLines(_ reader: inout LinkListReader, list: Int, total: inout Int) throws(SQLiteError) -> Bool {
        var slice: [(seq: Int, line: Int, url: String, failure: (code: String, message: String)?)] = []
        var seq = 0
        var pinRead = false
        while true {
            let entry: LinkListEntry?
            do {
                entry = try reader.next()
            } catch {
                seq += 1
                let line: Int = if case .malformed(_, let line, _) = error { line } else { 0 }
                slice.append((seq, line, "", ("bad_list", "\(error)")))
                break
            }
            if !pinRead {
                pinRead = true
                if let pin = reader.pin { try store.setPin(list: list, milliseconds: Int(pin.components.seconds) * 1000) }
            }
            guard let entry else { break }
            seq += 1
            switch entry.url {
            case .success(let url): slice.append((seq, entry.line, url.normalized, nil))
            case .failure(let error): slice.append((seq, entry.line, entry.text, ("bad_url", "\(error)")))
            }
            if slice.count >= 5000 {
                try store.addLines(list: list, slice)
                slice.removeAll(keepingCapacity: true)
                if stopRequested.load(ordering: .relaxed) { return false }
            }
        }
        try store.addLines(list: list, slice)
        total = seq
        return true
    }

    /// Moves a file that cannot be a list to `failed/`, with a report saying why.
    private func refuse(_ name: String, _ reason: String) {
        log("refused \(name) in the spool: \(reason)", level: .warning)
        let moved = folders.move(name, from: folders.spool, to: folders.failed, as: name) ?? name
        writeReport(["name": name, "state": "refused", "reason": reason], as: moved)
        onEvent(.refused(name: name, reason: reason))
    }

    private static func kind(_ mode: mode_t) -> String {
        switch mode & S_IFMT {
        case S_IFDIR: "a folder"
        case S_IFIFO: "a FIFO"
        case S_IFSOCK: "a socket"
        case S_IFCHR, S_IFBLK: "a device"
        default: "not a regular file"
        }
    }

    // MARK: - Warming

    private func startRun(_ record: ListRecord) {
        runs[record.id] = ListRun(
            id: record.id, name: record.name, submitter: downloader.makeSubmitter(), pinMilliseconds: record.pinMilliseconds)
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
                    outcomes.append((id, row.seq, .failed(code: "bad_url", message: "not a URL: \(row.url)")))
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
            log("cannot record list progress (will try again): \(error)", level: .error)
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
        let moved = folders.move(record.claimedFile, from: folders.claimed, to: destination, as: record.name) ?? record.name
        writeReport(report(for: record), as: moved, in: destination)
        try? store.finish(list: id, state: record.state, at: record.finishedAt!, file: moved)
        runs[id] = nil
        log("list \(record.name) \(record.state.rawValue): \(record.cached) cached, \(record.alreadyCached) already cached, \(record.failed) failed")
        onEvent(.listDone(record))
    }

    private func report(for record: ListRecord) -> [String: Any] {
        let failures = (try? store.failures(list: record.id, limit: Self.reportedFailures)) ?? []
        var report: [String: Any] = [
            "name": record.name, "state": record.state.rawValue, "total": record.total, "cached": record.cached,
            "already_cached": record.alreadyCached, "failed": record.failed,
            "failed_by_code": (try? store.failureCounts(list: record.id)) ?? [:], "bytes": record.bytes,
            "claimed_at": Self.rfc3339(record.claimedAt), "finished_at": Self.rfc3339(record.finishedAt ?? record.claimedAt),
            "duration_s": Double((record.finishedAt ?? record.claimedAt) - record.claimedAt) / 1000,
            "failures": failures.map { ["line": $0.line, "url": $0.url, "code": $0.code, "message": $0.message] },
        ]
        if record.failed > failures.count { report["failures_truncated"] = record.failed - failures.count }
        return report
    }

    /// Failures listed one by one in a report, at most (all are counted in `failed_by_code`).
    static let reportedFailures = 10_000

    /// Writes `NAME.report.json` beside the list (temp name, then rename: never half-written).
    private func writeReport(_ report: [String: Any], as name: String, in folder: Int32? = nil) {
        let folder = folder ?? folders.failed
        guard let data = try? JSONSerialization.data(withJSONObject: report, options: [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes])
        else { return }
        let temp = ".\(name).report.json.tmp"
        let fd = openat(folder, temp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0o640)
        guard fd >= 0 else {
            log("cannot write the report of \(name): \(String(cString: strerror(errno)))", level: .error)
            return
        }
        let complete = data.withUnsafeBytes { raw in write(fd, raw.baseAddress, raw.count) == raw.count }
        close(fd)
        guard complete, renameat(folder, temp, folder, name + ".report.json") == 0 else {
            log("cannot write the report of \(name): \(String(cString: strerror(errno)))", level: .error)
            unlinkat(folder, temp, 0)
            return
        }
    }

    private static func rfc3339(_ milliseconds: Int) -> String {
        var seconds = time_t(milliseconds / 1000)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        var buffer = [UInt8](repeating: 0, count: 32)
        let length = strftime(&buffer, buffer.count, "%Y-%m-%dT%H:%M:%S", &parts)
        return String(decoding: buffer[..<length], as: UTF8.self) + String(format: ".%03dZ", milliseconds % 1000)
    }
}
