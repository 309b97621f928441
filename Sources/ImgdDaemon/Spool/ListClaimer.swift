import Dispatch
import ImgdCore
import ImgdNetwork
import ImgdStore
import Logging
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Claims the link lists dropped in the spool, one at a time, on its own serial queue: a long
/// claim holds up only the claims queued behind it, never the lists being warmed, `cancel`,
/// `lists` or a stop (which ``SpoolService`` serves on its own queue).
///
/// A claim looks at the entry first (see ``ListClaimer/Refusal``: what is not a regular file
/// with one link is refused with a report in `failed/`), opens it with `O_NOFOLLOW` by its name's
/// bytes (``SpoolEntryName``), streams its URLs into the state database
/// (``ListStore``) in slices, and only then moves it to `.claimed/` and hands the list to
/// `onClaimed`. A crash before the move leaves the file in the spool and the half-made claim is
/// dropped at the next start (``SpoolService``'s resume); after the move the list resumes.
///
/// Its limits (``SpoolLimits``): a file larger than `maxListBytes` when opened is refused
/// unread; only the bytes the file had then are read (what is appended later is ignored); past
/// `maxListLines` entries the rest of the list is one `bad_list` failure. A claim can be
/// stopped (``stop()``) or cancelled (``cancel(named:)``) at any point: the reader asks before
/// each 64 KiB it reads, however long the line, so either answers within a read and a slice.
///
/// An `.xml` list that is a sitemap index names child sitemaps: each is fetched through the
/// downloader as a document and read into the same slices, within `sitemap-max-depth`,
/// `sitemap-max-children` and the list's own bounds (``ListClaimer+Sitemaps``). A restart
/// mid-claim claims the file anew, children included; once claimed, the list's URLs are all in
/// the database, as any list's.
///
/// An actor on its own serial queue (``QueueExecutor``): a claim blocks on SQLite and on the
/// file's reads, so it stays off the cooperative pool, and holds the actor while it runs. What
/// must reach a claim in progress — a stop, a cancel, new limits — goes through atomics and
/// mutexes that the claim reads between reads and slices, not through the actor.
actor ListClaimer {
    /// Lines recorded in one transaction, at most; and their text, at most (a slice of long
    /// junk lines is cut by its bytes, so a claim holds a few MiB whatever the list).
    static let sliceLines = 5000
    static let sliceBytes = 4 << 20
    /// The longest wait before a list the state database failed to record is claimed again (or
    /// a claimed one it failed to read back is read again):
    /// the waits double from 1 s up to this, so a database that stays broken costs a spool full
    /// of lists one claim attempt each per 30 s, not one a second.
    static let longestClaimRetrySeconds = 30

    // Not private: used by ListClaimer+Refusal.
    let folders: SpoolFolders
    private let store: ListStore
    let reports: ListReportWriter
    private let pruner: ListPruner
    let logger: Logger
    let onEvent: @Sendable (SpoolEvent) -> Void
    private let onClaimed: @Sendable (ListRecord, Bool) -> Void
    /// Fetches the children of sitemap indexes (``ListClaimer+Sitemaps``).
    let downloader: Downloader
    private nonisolated let executor = QueueExecutor(label: "imgd.spool-claim")
    /// Set by ``stop()``: a claim in progress gives up between slices, and queued claims return.
    private nonisolated let stopRequested = Atomic<Bool>(false)
    /// Folders dropped in the spool and reported in this run: left in place, reported once.
    var reportedFolders: Set<SpoolEntryName> = []
    /// Lists left in the spool because the state database failed while claiming them, with the
    /// attempts made: each is claimed again after a wait that doubles up to
    /// ``longestClaimRetrySeconds`` until it works (logged once, when it first fails).
    var waitingForState: [SpoolEntryName: Int] = [:]
    /// The failed attempts before the claim in progress (taken out of `waitingForState` when it
    /// starts: a claim that ends any other way leaves nothing behind).
    var attemptsBefore = 0
    /// Those of them with a retry due (one at a time per list, however often the watcher
    /// reports the name meanwhile).
    var claimRetryDue: Set<SpoolEntryName> = []
    private nonisolated let limits: Locked<SpoolLimits>
    /// The claim in progress, as `lists` shows it (`claiming`), and whether it is cancelled:
    /// read and marked by `cancel` while the claim holds the actor.
    private nonisolated let current = Locked<CurrentClaim?>(nil)

    nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

    private struct CurrentClaim {
        let id: Int
        let name: String
        /// The uid that owned the list's file (who may cancel it besides the privileged).
        let owner: UInt32
        var cancelled = false
        /// Set when the claim ends, for the `cancel`s waiting on it: how many URLs the cancel
        /// failed, or nil when the claim was given up (a stop, a database error) and the list is
        /// not there to cancel.
        let ended = Promise<Int?>()
    }

    /// How a claim's reading ended.
    enum Reading {
        /// To the end of the list (or its line limit, or its syntax's break).
        case complete
        /// Given up because the claimer is stopping: the file stays in the spool.
        case stopped
        /// Cut short by `cancel`: what was read is recorded, and the list ends cancelled.
        case cancelled
    }

    /// A claimer of the lists in `folders`, recording into `store`. `onClaimed` is called (on
    /// the claimer's queue, isolated to it) with each list once its file is in `.claimed/`, and whether it was
    /// cancelled while being claimed (its URLs are then failed as `cancelled` already).
    init(
        folders: SpoolFolders, store: ListStore, reports: ListReportWriter, pruner: ListPruner, limits: SpoolLimits,
        downloader: Downloader, logger: Logger,
        onEvent: @escaping @Sendable (SpoolEvent) -> Void,
        onClaimed: @escaping @Sendable (_ list: ListRecord, _ cancelled: Bool) -> Void
    ) {
        self.folders = folders
        self.limits = Locked(limits)
        self.store = store
        self.reports = reports
        self.pruner = pruner
        self.logger = logger
        self.onEvent = onEvent
        self.onClaimed = onClaimed
        self.downloader = downloader
    }

    /// Queues the claim of the spool entry `name` (a name reported twice is claimed once: the
    /// second finds it gone).
    /// Called on the watcher's queue; claims run in the order they were asked for.
    nonisolated func claim(_ name: SpoolEntryName) {
        executor.enqueue { [self] in assumeIsolated { $0.claimNow(name) } }
    }

    /// Stops claiming: the claim in progress gives up (its file stays in the spool, to be claimed
    /// anew at the next start), and so do those queued. Returns once they have. (Not isolated:
    /// the flag is set at once, while a claim holds the actor.)
    nonisolated func stop() async {
        stopRequested.store(true, ordering: .relaxed)
        await idle()
    }

    /// Nothing: run on the queue after what was enqueued before, it tells that all of it is done.
    private func idle() {}

    /// Applies new limits (a reload) to the claims that start after this.
    nonisolated func update(limits new: SpoolLimits) {
        limits.withLock { $0 = new }
    }

    /// Cancels the claim in progress of the list named `name` (as `lists` shows it), if
    /// `mayCancel` allows it for the uid that owned its file: its reading stops, what was read is
    /// kept and failed as `cancelled`, and the list ends cancelled, in `failed/` with its report.
    /// Answers how many URLs were failed once the claim has stopped (within one 64 KiB read and
    /// one slice); `notFound` when no list of that name is being claimed (or the claim was given
    /// up by a stop or a database error before it could be cancelled).
    nonisolated func cancel(named name: String, if mayCancel: @escaping @Sendable (_ owner: UInt32?) -> Bool) async
        -> ListCancellation
    {
        var refusal = ListCancellation.notFound
        let ended: Promise<Int?>? = current.withLock { claim in
            guard let owner = claim?.owner, claim?.name == name else { return nil }
            guard mayCancel(owner) else {
                refusal = .forbidden(owner: owner)
                return nil
            }
            claim!.cancelled = true
            return claim!.ended
        }
        guard let ended, let failed = await ended.value else { return refusal }
        return .cancelled(pending: failed)
    }

    nonisolated var isStopping: Bool { stopRequested.load(ordering: .relaxed) }
    nonisolated var isCancelled: Bool { current.withLock { $0?.cancelled ?? false } }

    /// Ends the claim in progress, answering the `cancel`s waiting on it with `cancelled`.
    private func endClaim(cancelled: Int?) {
        let ended = current.withLock { claim in
            defer { claim = nil }
            return claim?.ended
        }
        ended?.fulfill(cancelled)
    }

    private func claimNow(_ entry: SpoolEntryName) {
        attemptsBefore = waitingForState.removeValue(forKey: entry) ?? 0
        guard !isStopping, !entry.isIgnored else { return }
        // The list's name from here on (`lists`, reports, the log); the file is still `entry`.
        let name = entry.display
        // Looked at before it is opened: opening a FIFO or a device does things.
        var info = stat()
        guard entry.withCString({ fstatat(folders.spool, $0, &info, AT_SYMLINK_NOFOLLOW) }) == 0 else {
            return  // gone: claimed already (a name can be reported twice) or removed
        }
        if let refusal = Refusal(info) { return refuse(entry, refusal) }
        // A list named like a report would take its report's name in done/ or failed/ (and be
        // replaced by it, or removed by a retry): refused, moved aside under another name.
        if name.hasSuffix(ListReportWriter.suffix) {
            return refuse(
                entry, movingItBecause: "its name ends in \(ListReportWriter.suffix), which is kept for reports (rename it and drop it again)",
                code: FailureCode.badList.rawValue, as: SpoolEntryName.fileName(for: name + ".list"))
        }
        let fd = entry.withCString { openat(folders.spool, $0, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC) }
        if fd < 0 {
            let code = errno
            guard code != ENOENT else { return }
            // Replaced since the look (ELOOP: now a symlink) or unreadable: look again.
            if entry.withCString({ fstatat(folders.spool, $0, &info, AT_SYMLINK_NOFOLLOW) }) == 0, let refusal = Refusal(info) {
                return refuse(entry, refusal)
            }
            return refuse(entry, movingItBecause: "it cannot be opened: \(String(cString: strerror(code)))")
        }
        fstat(fd, &info)
        if let refusal = Refusal(info) {
            close(fd)
            return refuse(entry, refusal)
        }
        let limits = limits.withLock { $0 }
        // The size when claimed, and the most that is read: a writer still appending (or a
        // sparse 50 GB file) cannot make the claim last.
        let size = Int(info.st_size)
        guard size <= limits.maxListBytes else {
            close(fd)
            refuse(
                entry, movingItBecause: "too large: the file is \(size) bytes (\(ByteCount(size))), more than max-list-bytes (\(ByteCount(limits.maxListBytes)))",
                code: FailureCode.badList.rawValue)
            return
        }
        let path = folders.path + "/" + name
        var reader: LinkListReader
        // What the list's own bytes take of max-list-bytes: a compressed sitemap's inflated size.
        var listBytes = size
        switch Self.inflatedSitemap(fd, name: name, size: size, limit: min(limits.maxListBytes, Self.maxSitemapBytes)) {
        case .xml(let xml)?:
            close(fd)
            listBytes = xml.count
            reader = LinkListReader(xml: xml, path: path) { [self] in isStopping || isCancelled }
        case .refused(let reason)?:
            close(fd)
            refuse(entry, movingItBecause: reason, code: FailureCode.badList.rawValue)
            return
        case nil:
            do {
                reader = try LinkListReader(fileDescriptor: fd, path: path, byteLimit: size) { [self] in isStopping || isCancelled }
            } catch {
                refuse(entry, movingItBecause: "\(error)")
                return
            }
        }
        let record: ListRecord
        do {
            record = try store.beginClaim(
                fileName: name, format: reader.format.rawValue, pinMilliseconds: nil, at: WallClock.nowMilliseconds(),
                owner: info.st_uid)
        } catch {
            claimLater(entry, because: error)
            return
        }
        current.withLock { $0 = CurrentClaim(id: record.id, name: record.name, owner: info.st_uid) }
        var cancelledURLs: Int?
        defer { endClaim(cancelled: cancelledURLs) }
        var total = 0
        var reading: Reading
        var walk = SitemapWalk(
            maxDepth: limits.sitemapMaxDepth, maxChildren: limits.sitemapMaxChildren, bytesLeft: limits.maxListBytes - listBytes,
            maxListBytes: limits.maxListBytes, owner: info.st_uid, submitter: downloader.makeSubmitter())
        do {
            reading = try recordLines(&reader, list: record.id, maxLines: limits.maxListLines, walk: &walk, total: &total)
            if reading != .stopped, let summary = walk.summary { try store.setSitemapSummary(list: record.id, summary) }
            // A JSON list's `ready_by` may follow its URLs: known once the reading is done. A
            // time of day is the next one after the claim, in the daemon's zone.
            if reading != .stopped, let readyBy = reader.readyBy {
                let deadline = Int(readyBy.deadline(afterMilliseconds: Int64(record.claimedAt), in: SystemLocalZone()))
                try store.setReadyBy(list: record.id, milliseconds: deadline)
                // Warmed all the same (a list dropped late still wants its images), and said.
                if deadline <= record.claimedAt {
                    logger.forList(name).warning(
                        "the list's deadline \(readyBy) (\(URLExpiry.iso8601(milliseconds: deadline))) had passed when it was claimed: it is warmed as any list, and its report will say the deadline was missed")
                }
            }
        } catch {
            abandon(record)
            claimLater(entry, because: error)
            return
        }
        // A cancel that came after the last read still counts.
        if reading == .complete, isCancelled { reading = .cancelled }
        guard reading != .stopped else {
            // The file stays in the spool; the next start drops the half-made claim (see
            // `SpoolService.resume()`) and claims the file anew, whole.
            logger.forList(name).info("stopping: list left in the spool, to be claimed at the next start")
            return
        }
        // The URLs on disk before the file leaves the spool: commits are not synced (WAL,
        // synchronous NORMAL), and after a power cut the move (journaled metadata) could be
        // found done with the rows lost, a list in `.claimed/` that nothing resumes. One fsync
        // per list. If it fails the move still happens: a kill cannot lose the rows anyway.
        do {
            try store.checkpoint()
        } catch {
            logger.forList(name).warning("cannot sync the state database before moving the list to .claimed/: \(error)")
        }
        guard let moved = folders.move(entry, from: folders.spool, to: folders.claimed, as: record.claimedFile) else {
            logger.forList(name).error("cannot move the list to .claimed/: \(String(cString: strerror(errno))); leaving it")
            abandon(record)
            return
        }
        // The move was by name: during the claim the dropper may have put something else under
        // it (a symlink to /etc/shadow, a FIFO, another file). Only the daemon writes in
        // `.claimed/`, so what is there now stays what was moved: compared with the file read.
        var claimedInfo = stat()
        let same = fstatat(folders.claimed, moved, &claimedInfo, AT_SYMLINK_NOFOLLOW) == 0
            && claimedInfo.st_dev == info.st_dev && claimedInfo.st_ino == info.st_ino
        guard same else {
            let kind = switch Refusal(claimedInfo) {
            case .notRegular(let kind)?: kind
            case .folder?: "a folder"
            case .hardLink?, nil: "another file"
            }
            unlinkat(folders.claimed, moved, (claimedInfo.st_mode & S_IFMT) == S_IFDIR ? AT_REMOVEDIR : 0)
            abandon(record)
            refuseReplaced(name: name, by: kind)
            return
        }
        do {
            try store.finishClaim(list: record.id)
        } catch {
            // Harmless: it is warmed all the same, its finish records its state, and a restart
            // before that finds its file in `.claimed/` and marks it claimed then.
            logger.forList(name).warning("cannot mark the list claimed in the state database, ignoring (it is warmed all the same): \(error)")
        }
        let cancelled = reading == .cancelled
        if cancelled {
            do {
                cancelledURLs = try store.failPending(list: record.id, code: FailureCode.cancelled.rawValue, message: "the list was cancelled")
            } catch {
                // Its run is cancelled and fails what is still pending when it finishes.
                cancelledURLs = 0
                logger.forList(name).warning("cannot fail the URLs of the cancelled list in the state database now (its finish does): \(error)")
            }
            logger.forList(record.name).info("list's claim cancelled after \(Self.lines(total))")
        } else {
            logger.forList(record.name).info("list claimed: \(Self.lines(total))")
        }
        onEvent(.listClaimed(name: record.name, total: total))
        handOver(record, cancelled: cancelled)
    }

    /// Hands the claimed list, read back whole (with what its lines said: pin, refresh), to the
    /// spool; read again, after waits that double from 1 s to ``longestClaimRetrySeconds``, while
    /// the state database fails, since the list is in `.claimed/` and nothing else would start it
    /// before a restart.
    private func handOver(_ record: ListRecord, cancelled: Bool, attempts: Int = 0) {
        // Stopped: it is active in the database and in `.claimed/`, and the next start resumes it.
        guard !isStopping else { return }
        do {
            guard let claimed = try store.list(record.id) else { return }  // pruned: a cancel finished it
            onClaimed(claimed, cancelled)
        } catch {
            if attempts == 0 {
                logger.forList(record.name).error(
                    "cannot read the claimed list back from the state database: \(error); trying again (after 1 s, then at most every \(Self.longestClaimRetrySeconds) s)")
            }
            let seconds = min(Self.longestClaimRetrySeconds, 1 << min(attempts, 5))
            executor.queue.asyncAfter(deadline: .now() + .seconds(seconds)) { [self] in
                assumeIsolated { $0.handOver(record, cancelled: cancelled, attempts: attempts + 1) }
            }
        }
    }

    /// "1 line", "2 lines".
    static func lines(_ count: Int) -> String { count == 1 ? "1 line" : "\(count) lines" }

    /// Leaves `entry` in the spool after the state database failed to record it (`error`), and
    /// claims it again in a moment: nothing else would, before a restart (the watcher reports a
    /// name once). Logged the first time for each list.
    private func claimLater(_ entry: SpoolEntryName, because error: some Error) {
        let attempts = attemptsBefore
        if attempts == 0 {
            logger.forList(entry.display).error(
                "cannot record the list in the state database, leaving it in the spool and trying again (after 1 s, then at most every \(Self.longestClaimRetrySeconds) s): \(error)")
        }
        waitingForState[entry] = attempts + 1
        guard claimRetryDue.insert(entry).inserted else { return }
        let seconds = min(Self.longestClaimRetrySeconds, 1 << min(attempts, 5))
        executor.queue.asyncAfter(deadline: .now() + .seconds(seconds)) { [self] in
            assumeIsolated { claimer in
                claimer.claimRetryDue.remove(entry)
                claimer.claimNow(entry)
            }
        }
    }

    /// Drops a claim that did not complete (``ListPruner/dropHalfMadeClaim(_:)``).
    private func abandon(_ record: ListRecord) {
        pruner.dropHalfMadeClaim(record)
    }

    /// A line of a list as it is recorded.
    typealias ClaimLine = (
        seq: Int, line: Int, url: String, failure: (code: String, message: String)?, options: LinkListItemOptions
    )

    /// The lines of a claim gathered into slices, each recorded in one transaction, and their
    /// count against `max-list-lines` (a sitemap's children count with the list).
    struct ClaimLines {
        let list: Int
        let maxLines: Int
        var slice: [ClaimLine] = []
        var sliceBytes = 0
        var seq = 0
        /// Set once `max-list-lines` is reached: nothing more is read.
        var isFull = false

        /// Whether the slice is due to be recorded.
        var isDue: Bool { slice.count >= ListClaimer.sliceLines || sliceBytes >= ListClaimer.sliceBytes }

        /// Adds a line; past `max-list-lines`, the `bad_list` line saying so instead, and the
        /// reading stops (false).
        mutating func add(line: Int, url: String, failure: (code: String, message: String)?, options: LinkListItemOptions = .none) -> Bool {
            seq += 1
            guard seq <= maxLines else {
                let message = "too large: more than max-list-lines (\(maxLines)) entries; the list was read up to line \(line)"
                slice.append((seq, line, "", (FailureCode.badList.rawValue, message), .none))
                isFull = true
                return false
            }
            slice.append((seq, line, url, failure, options))
            sliceBytes += url.utf8.count
            return true
        }

        mutating func record(in store: ListStore) throws(SQLiteError) {
            try store.addLines(list: list, slice)
            slice.removeAll(keepingCapacity: true)
            sliceBytes = 0
        }
    }

    /// Streams the list's lines into the database in slices; a list that breaks its syntax part
    /// way, or has more than `maxLines` entries, keeps what came before, plus a `bad_list` line
    /// saying where and why. A stop gives up at once (nothing more is written); a cancel keeps
    /// what was read. The children of a sitemap index are fetched and read in place, within the
    /// same bounds (`walk`).
    private func recordLines(_ reader: inout LinkListReader, list: Int, maxLines: Int, walk: inout SitemapWalk, total: inout Int)
        throws(SQLiteError) -> Reading
    {
        var lines = ClaimLines(list: list, maxLines: maxLines)
        let reading = try readEntries(&reader, into: &lines, walk: &walk, depth: 0, source: "")
        if reading == .stopped || isStopping { return .stopped }
        try lines.record(in: store)
        total = lines.seq
        return reading
    }

    /// Reads `reader`'s entries into `lines`: the list's own (`depth` 0) or a sitemap's read for
    /// it (`source`, its URL, names it in a `bad_list` line when it breaks). `.complete` when
    /// this reader is done (or the list is full); `.stopped` and `.cancelled` end the claim.
    private func readEntries(
        _ reader: inout LinkListReader, into lines: inout ClaimLines, walk: inout SitemapWalk, depth: Int, source: String
    ) throws(SQLiteError) -> Reading {
        var pinRead = depth > 0
        while true {
            let entry: LinkListEntry?
            do {
                entry = try reader.next()
            } catch .interrupted {
                return isStopping ? .stopped : .cancelled
            } catch {
                let line: Int = if case .malformed(_, let line, _) = error { line } else { 0 }
                let message = depth == 0 ? "\(error)" : "sitemap \(source) is malformed: \(error)"
                if depth > 0 { walk.failed += 1 }
                _ = lines.add(line: line, url: source, failure: (FailureCode.badList.rawValue, message))
                break
            }
            if !pinRead {
                pinRead = true
                if let pin = reader.pin { try store.setPin(list: lines.list, milliseconds: Int(pin.components.seconds) * 1000) }
                if let refresh = reader.refresh { try store.setRefresh(list: lines.list, rule: refresh) }
            }
            if depth == 0, walk.kind == nil { walk.kind = reader.sitemapKind }
            guard let entry else { break }
            if entry.isSitemap, case .success(let url) = entry.url {
                let reading = try readChild(url, line: entry.line, into: &lines, walk: &walk, depth: depth + 1)
                guard reading == .complete, !lines.isFull else { return reading }
            } else {
                let added = switch entry.url {
                case .success(let url): lines.add(line: entry.line, url: url.normalized, failure: nil, options: entry.options)
                case .failure(let error): lines.add(line: entry.line, url: entry.text, failure: (FailureCode.badURL.rawValue, "\(error)"))
                }
                guard added else { return .complete }
            }
            if lines.isDue {
                if isStopping { return .stopped }
                try lines.record(in: store)
            }
        }
        walk.skippedPages += reader.skippedPageLocations
        return .complete
    }

    /// Fetches the sitemap `url` named at `line` of a sitemap index and reads it into `lines`,
    /// unless `walk` refuses it (too deep, too many, a cycle, no bytes left), which is a
    /// `bad_list` line naming it, as is a failed fetch.
    private func readChild(_ url: ImageURL, line: Int, into lines: inout ClaimLines, walk: inout SitemapWalk, depth: Int)
        throws(SQLiteError) -> Reading
    {
        let name = url.normalized
        if let (reason, say) = walk.refusal(of: name, depth: depth) {
            walk.notRead += 1
            if say { _ = lines.add(line: line, url: name, failure: (FailureCode.badList.rawValue, "sitemap \(name) not read: \(reason)")) }
            return .complete
        }
        walk.visited.insert(name)
        let limit = min(walk.bytesLeft, Self.maxSitemapBytes)
        let body: [UInt8]
        switch waitForDocument(url, limit: limit, walk: walk) {
        case .stopped: return .stopped
        case .cancelled: return .cancelled
        case .failed(let error):
            walk.failed += 1
            _ = lines.add(line: line, url: name, failure: (FailureCode.badList.rawValue, Self.childFailure(name, error, limit: limit)))
            return .complete
        case .fetched(let bytes) where GzipInflater.isGzip(bytes):
            // A compressed sitemap (`.xml.gz`, or served gzip without a Content-Encoding).
            switch GzipInflater.inflate(bytes, limit: limit) {
            case .success(let inflated):
                body = inflated
            case .failure(let failure):
                walk.failed += 1
                _ = lines.add(line: line, url: name, failure: (FailureCode.badList.rawValue, "sitemap \(name) not read: \(failure)"))
                return .complete
            }
        case .fetched(let bytes):
            body = bytes
        }
        walk.bytesLeft -= body.count
        walk.fetched.append(name)
        walk.ancestors.append(name)
        defer { walk.ancestors.removeLast() }
        var child = LinkListReader(xml: body, path: name) { [self] in isStopping || isCancelled }
        return try readEntries(&child, into: &lines, walk: &walk, depth: depth, source: name)
    }
}
