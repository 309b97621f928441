import Dispatch
import ImgdCore
import ImgdNetwork
import ImgdStore
import Logging

#if canImport(Glibc)
import Glibc
#endif

/// Warming: at most ``WarmingLimits/activeLists`` lists at once, the others waiting their turn;
/// each list feeds the downloader a window of its URLs at a time; the answers come back in
/// batches and are written to the state database in batches.
extension SpoolService {
    /// A claimed list starts warming when fewer than ``WarmingLimits/activeLists`` are (and none
    /// waits before it), else waits its turn (``startWaiting()`` starts it).
    func admit(_ record: ListRecord) {
        // Once: a list handed over after a retry may already have been resumed (or the reverse).
        guard runs[record.id] == nil, !turns.withLock({ $0.waiting.contains { $0.id == record.id } }) else { return }
        let cap = warming.activeLists
        let (position, heldFor) = turns.withLock { turns -> (Int?, [String]) in
            let heldFor = turns.gate.holding(record.name)
            guard turns.warmed >= cap || turns.hasStartableWaiting || !heldFor.isEmpty else {
                turns.warmed += 1
                return (nil, [])
            }
            turns.waiting.append(record)
            return (turns.waiting.count, heldFor)
        }
        guard let position else {
            startRun(record)
            return
        }
        guard heldFor.isEmpty else {
            logger.forList(record.name).info(
                "list is held to calendar window \(heldFor.joined(separator: " or ")), closed now: it starts when the window opens")
            return
        }
        logger.forList(record.name).info(
            "list waits for its turn (position \(position)): max-active-lists (\(warming.maxActiveLists)) lists are being warmed")
    }

    /// Starts the waiting lists, in turn, while fewer than ``WarmingLimits/activeLists`` are
    /// warmed (one finished or was cancelled, or a reload raised the cap). Their first windows
    /// are read by a pump enqueued behind this one, not inside a pump or a finish in progress.
    ///
    /// The turn goes to a waiting list of the owner with the fewest lists being warmed: of that
    /// owner's, the one whose deadline (still to come) is soonest, else the first claimed. One
    /// member's thousand lists, dropped first, take the turns as they come free only while no
    /// other member's list waits, deadlines or not: a deadline orders a member's own lists, it
    /// does not jump another member's.
    func startWaiting() {
        guard !stopping else { return }
        let cap = warming.activeLists
        var started = false
        // Lists paused by their window's close go first once it opens again: their URLs are
        // queued already.
        for id in runs.keys.sorted() {
            guard let run = runs[id], run.paused, !run.cancelled else { continue }
            let resumed = turns.withLock { turns in
                guard turns.warmed < cap, turns.gate.holding(run.name).isEmpty else { return false }
                turns.warmed += 1
                turns.paused.remove(id)
                return true
            }
            guard resumed else { continue }
            runs[id]!.paused = false
            runs[id]!.tookTurn = true
            downloader.hold(run.submitter, false)
            logger.forList(run.name).info("list resumes: its calendar window is open")
            started = true
        }
        var warmedBy: [UInt32: Int] = [:]
        for run in runs.values where run.tookTurn && !run.cancelled { warmedBy[run.keyOwner, default: 0] += 1 }
        let now = WallClock.nowMilliseconds()
        while let record = turns.withLock({ [warmedBy] turns -> ListRecord? in
            guard turns.warmed < cap else { return nil }
            // Among the lists not held to a closed window: of the owner with the fewest warmed, the
            // one whose deadline (still to come) is soonest, then claim order.
            var next: Int?
            for (index, waiting) in turns.waiting.enumerated() where turns.gate.holding(waiting.name).isEmpty {
                if let chosen = next {
                    let rank = (warmedBy[waiting.keyOwner, default: 0], Self.comingDeadline(waiting, now: now))
                    let chosenRank = (warmedBy[turns.waiting[chosen].keyOwner, default: 0], Self.comingDeadline(turns.waiting[chosen], now: now))
                    if rank >= chosenRank { continue }
                }
                next = index
            }
            guard let next else { return nil }
            turns.warmed += 1
            return turns.waiting.remove(at: next)
        }) {
            warmedBy[record.keyOwner, default: 0] += 1
            logger.forList(record.name).info("list starts: its turn came")
            startRun(record)
            started = true
        }
        if started { onExecutor { $0.pump() } }
    }

    /// A waiting list's deadline when it is still to come, else `Int.max` (none, or passed: a
    /// list cannot jump the turns with a deadline that can no longer be met).
    static func comingDeadline(_ record: ListRecord, now: Int) -> Int {
        guard let readyBy = record.readyBy, readyBy > now else { return .max }
        return readyBy
    }

    /// The calendar windows open now changed: lists held to a window that closed pause (their
    /// queued URLs are held by the downloader, their running transfers finish, their turn goes
    /// to another list); lists whose window opened start or resume in turn.
    public func update(windowGate gate: ListWindowGate) {
        turns.withLock { $0.gate = gate }
        for id in runs.keys.sorted() {
            guard let run = runs[id], run.tookTurn, !run.cancelled, !run.paused else { continue }
            let heldFor = gate.holding(run.name)
            guard !heldFor.isEmpty else { continue }
            runs[id]!.paused = true
            runs[id]!.tookTurn = false
            turns.withLock { turns in
                turns.warmed -= 1
                turns.paused.insert(id)
            }
            downloader.hold(run.submitter, true)
            logger.forList(run.name).info(
                "list paused: calendar window \(heldFor.joined(separator: " or ")) closed; its running transfers finish, the rest waits for the window")
        }
        startWaiting()
        pump()
    }

    /// Makes the list's run. One that is not `cancelled` has taken its turn (counted in
    /// ``Turns/warmed`` by the caller); a cancelled one finishes at once, without a turn.
    func startRun(_ record: ListRecord, cancelled: Bool = false) {
        runs[record.id] = ListRun(
            id: record.id, name: record.name, submitter: downloader.makeSubmitter(), pinMilliseconds: record.pinMilliseconds,
            keyOwner: record.keyOwner, refresh: record.refresh, exhausted: cancelled, cancelled: cancelled, tookTurn: !cancelled)
        followDeadline(of: record)
        finishIfDone(record.id)
    }

    /// Tops up every list's window, in turn: each holds at most ``WarmingLimits/window`` URLs
    /// and ``WarmingLimits/windowBytes`` of them (but always one when it holds none), so the
    /// lists together stay within `max-queued` and `max-queued-bytes`.
    func pump() {
        // While the state database fails, no new URL goes out: each would add an outcome to
        // keep in memory (see SpoolService+StateTrouble).
        guard !stopping, !stateTrouble.isFailing else { return }
        let window = warming.window, windowBytes = warming.windowBytes
        for id in runs.keys.sorted() {
            guard var run = runs[id], !run.exhausted, !run.cancelled, !run.paused else { continue }
            let room = window - run.outstanding
            guard room >= max(1, window / 4) else { continue }  // refill in batches, not one by one
            // The items marked `high` first (their own index: none costs nothing), then those whose
            // signed URL expires, soonest first (the same), then the rest.
            var rows: [PendingURL] = []
            var phase = ReadPhase.rest
            do {
                if let highCursor = run.highCursor {
                    rows = try store.pendingURLs(list: id, after: highCursor, limit: room, high: true)
                    if rows.isEmpty { run.highCursor = nil } else { phase = .high }
                }
                if phase == .rest, !run.expiringRead {
                    rows = try store.pendingExpiringURLs(list: id, after: run.expiringCursor, limit: room)
                    if rows.isEmpty { run.expiringRead = true } else { phase = .expiring }
                }
                if phase == .rest { rows = try store.pendingURLs(list: id, after: run.cursor, limit: room) }
            } catch {
                // Not read is not exhausted: read again on the retry.
                stateFailed("reading the list's pending URLs from the state database", error, list: run.name)
                return
            }
            if phase == .rest {
                guard !rows.isEmpty else {
                    run.exhausted = true
                    runs[id] = run
                    finishIfDone(id)
                    continue
                }
            }
            var urls: [ImageRequest] = []
            var lastRow: PendingURL?
            for row in rows {
                guard let url = try? ImageURL(row.url) else {
                    outcomes.append((id, row.seq, .failed(code: FailureCode.badURL.rawValue, message: "not a URL: \(row.url)")))
                    lastRow = row
                    continue
                }
                // Bytes as the downloader counts them. Past the list's share, the rest of the rows
                // are read again next time.
                let size = url.normalized.utf8.count
                guard run.outstandingBytes + size <= windowBytes || run.outstanding == 0 else { break }
                var request = downloader.request(for: url, chosenKey: row.options.key, owner: run.keyOwner, sha256: row.options.sha256)
                if row.options.isHighPriority { request.priority = .onDemand }
                request.refresh = row.options.refresh ?? run.refresh
                request.mirrors = row.options.mirrors
                urls.append(request)
                run.outstanding += 1
                run.outstandingBytes += size
                run.inFlight[url.normalized, default: []].append((row.seq, row.options.pin.map { Int($0.components.seconds) * 1000 }))
                lastRow = row
            }
            if let lastRow {
                switch phase {
                case .high: run.highCursor = lastRow.seq
                case .expiring: run.expiringCursor = (lastRow.expiresAt ?? Int.max, lastRow.seq)
                case .rest: run.cursor = lastRow.seq
                }
            }
            runs[id] = run
            guard !urls.isEmpty else {
                // Every row read was unusable (and is now recorded as failed): with nothing
                // outstanding, no answer will come to pump again, so read on (or find the list
                // finished) on the next turn. (With URLs outstanding, their answers pump.)
                if run.outstanding == 0 { onExecutor { $0.pump() } }
                continue
            }
            let answers = answers
            // Asked for the list's owner: that member's `cancel` of a URL stops this list's item.
            downloader.prefetch(urls, submitter: run.submitter, caller: run.keyOwner) { [self] url, result in
                let isFirst = answers.withLock { waiting in
                    waiting.append((id, url, result))
                    return waiting.count == 1
                }
                if isFirst { onExecutor { $0.takeAnswers() } }
            }
            // The high or expiring items ran out with room to spare: the next ones are read on the
            // next turn, not after the first answer (a slow first item would idle the slots).
            if phase != .rest, rows.count < room { onExecutor { $0.pump() } }
        }
        scheduleFlush()
    }

    /// Which of a list's pending items a read of ``pump()`` takes.
    enum ReadPhase {
        /// Those marked `high`, in list order.
        case high
        /// Those whose signed URL states an expiry, soonest first.
        case expiring
        /// The others, in list order.
        case rest
    }

    /// On the queue: answers everything the downloader has handed over since the last time.
    func takeAnswers() {
        let batch = answers.withLock { waiting in
            var taken: [(list: Int, url: ImageURL, result: Result<CachedImage, DownloadError>)] = []
            swap(&taken, &waiting)
            return taken
        }
        for answer in batch { answered(list: answer.list, url: answer.url, result: answer.result) }
    }

    func answered(list id: Int, url: ImageURL, result: Result<CachedImage, DownloadError>) {
        // In place (`runs[id]!`): a copy of the run, changed and stored back, would copy its
        // in-flight table (up to `window` URLs) for every answer.
        guard let (seq, ownPin) = runs[id]?.inFlight[url.normalized]?.first else { return }
        runs[id]!.inFlight[url.normalized]!.removeFirst()
        if runs[id]!.inFlight[url.normalized]!.isEmpty { runs[id]!.inFlight[url.normalized] = nil }
        runs[id]!.outstanding -= 1
        runs[id]!.outstandingBytes -= url.normalized.utf8.count
        runs[id]!.deadline?.settle()
        let run = runs[id]!
        switch result {
        case .success(let image):
            outcomes.append((
                id, seq,
                image.source == .network
                    ? .cached(bytes: image.bytes, servedBy: image.download?.servedBy) : .alreadyCached(bytes: image.bytes)
            ))
            if let pin = ownPin ?? run.pinMilliseconds { pins.append((image.key, WallClock.nowMilliseconds() + pin)) }
            if image.source == .network, let download = image.download {
                onEvent(.fetched(
                    url: url.normalized, bytes: image.bytes, format: download.image.format.rawValue, servedBy: download.servedBy))
            }
        case .failure(.cancelled) where stopping:
            return  // shutting down: the URL stays pending and is fetched after the restart
        case .failure(let error):
            outcomes.append((id, seq, .failed(code: error.code, message: error.message)))
            onEvent(.failed(url: url.normalized, code: error.code, message: error.message))
        }
        if outcomes.count >= Self.flushCount { flush() } else { scheduleFlush() }
        if run.outstanding <= warming.window * 3 / 4 { pump() }
        finishIfDone(id)
    }

    func scheduleFlush() {
        guard !flushScheduled, !outcomes.isEmpty || !pins.isEmpty else { return }
        flushScheduled = true
        executor.queue.asyncAfter(deadline: .now() + Self.flushDelay) { [self] in
            assumeIsolated { spool in
                spool.flushScheduled = false
                spool.flush()
            }
        }
    }

    /// Writes the outcomes and pins kept. While the state database fails only the retry pass
    /// (and the stop) writes, `evenWhileFailing`: an attempt per answer would redo the whole
    /// batch each time, every one of them failing.
    func flush(evenWhileFailing: Bool = false) {
        guard evenWhileFailing || !stateTrouble.isFailing else { return }
        guard !outcomes.isEmpty || !pins.isEmpty else { return }
        if !outcomes.isEmpty {
            do {
                try store.record(outcomes)
                outcomes.removeAll(keepingCapacity: true)
            } catch {
                // Kept, and written by the retry (finishing waits for them).
                stateFailed("recording the progress of lists in the state database", error)
            }
        }
        guard !pins.isEmpty else { return }
        do {
            // One transaction for the batch; kept whole for the retry if the index refuses.
            try disk.index.pin(pins)
            pins.removeAll(keepingCapacity: true)
        } catch {
            stateFailed("pinning \(pins.count) entries of lists in the cache index", error)
        }
    }
}
