import Dispatch
import ImgdCore
import ImgdNetwork
import ImgdStore
import Logging

#if canImport(Glibc)
import Glibc
#endif

/// The spool's commands (`cancel`, `retry`, `lists`, `failed`) and what status lines read.
extension SpoolService {
    /// Applies new limits (a reload) to the claims that start after this.
    public func update(limits: SpoolLimits) {
        self.limits = limits
        claimer?.update(limits: limits)
    }

    /// Applies new warming limits (a reload): windows follow them from the next refill; a raised
    /// cap starts waiting lists at once, a lowered one lets the lists being warmed finish and
    /// starts no other until fewer are.
    public func update(warming: WarmingLimits) {
        self.warming = warming
        startWaiting()
    }

    /// Cancels the list in progress named `name` — one being warmed or waiting for its turn, or one still being claimed
    /// (its claim stops; what was read is failed as cancelled) — if `mayCancel` allows it for the
    /// uid that owned the list's file (nil: not recorded). Throws when the state database fails:
    /// nothing is cancelled then.
    public func cancel(list name: String, if mayCancel: @escaping @Sendable (_ owner: UInt32?) -> Bool = { _ in true }) async
        throws(SQLiteError) -> ListCancellation
    {
        let warming = try cancelRun(named: name, if: mayCancel)
        guard warming == .notFound else { return warming }
        let claiming = await claimer?.cancel(named: name, if: mayCancel) ?? .notFound
        guard claiming == .notFound else { return claiming }
        // Claimed between the two looks: the claimer hands a list over before it forgets it.
        return try cancelRun(named: name, if: mayCancel)
    }

    func cancelRun(named name: String, if mayCancel: @escaping @Sendable (_ owner: UInt32?) -> Bool)
        throws(SQLiteError) -> ListCancellation
    {
        if let record = turns.withLock({ $0.waiting.first { $0.name == name } }) {
            return try cancelWaiting(record, if: mayCancel)
        }
        guard let id = runs.values.first(where: { $0.name == name })?.id else { return .notFound }
        let owner = try store.owner(ofList: id)
        guard mayCancel(owner) else { return .forbidden(owner: owner) }
        // Its outcomes so far are written first; then what is pending fails as cancelled. Should
        // either fail, nothing is cancelled yet (the caller may try again).
        flush()
        let pending = try store.failPending(list: id, code: FailureCode.cancelled.rawValue, message: "the list was cancelled")
        runs[id]!.cancelled = true
        runs[id]!.exhausted = true
        downloader.cancel(submitter: runs[id]!.submitter)
        finishIfDone(id)
        return .cancelled(pending: pending)
    }

    /// Cancels a list waiting for its turn: it leaves the queue and finishes at once, every URL
    /// failed as cancelled (nothing of it was handed to the downloader).
    func cancelWaiting(_ record: ListRecord, if mayCancel: @escaping @Sendable (_ owner: UInt32?) -> Bool)
        throws(SQLiteError) -> ListCancellation
    {
        let owner = try store.owner(ofList: record.id)
        guard mayCancel(owner) else { return .forbidden(owner: owner) }
        flush()
        let pending = try store.failPending(list: record.id, code: FailureCode.cancelled.rawValue, message: "the list was cancelled")
        turns.withLock { $0.waiting.removeAll { $0.id == record.id } }
        startRun(record, cancelled: true)
        return .cancelled(pending: pending)
    }

    /// Puts the failed URLs of the list named `name` back in the queue (a finished list is
    /// taken back from `failed/`). Returns how many, or nil when there is no such list.
    /// The cached URLs of the latest list named `name` (at most `limit`, each with its item's
    /// chosen key), for `refresh --list`; nil when there is no such list.
    public func cachedURLs(ofList name: String, limit: Int) throws(SQLiteError) -> (keyOwner: UInt32, items: [(url: String, key: String?)])? {
        flush()
        guard let record = try store.lists(finishedLimit: 1000).first(where: { $0.name == name }) else { return nil }
        return (record.keyOwner, try store.cachedURLs(list: record.id, limit: limit))
    }

    /// Fetches the failed URLs of the list named `name` again, when `mayRetry` allows it for
    /// the list's owner (the uid that dropped it; nil: not recorded).
    public func retry(list name: String, if mayRetry: @Sendable (_ owner: UInt32?) -> Bool = { _ in true })
        throws(SQLiteError) -> ListRetry
    {
        do {
            flush()
            guard let record = try store.lists(finishedLimit: 1000).first(where: { $0.name == name }) else { return .notFound }
            guard mayRetry(record.owner) else { return .forbidden(owner: record.owner) }
            // The downloader would answer these URLs from its failure memory again: forget their
            // failures first (theirs only — what other lists and clients failed stays remembered).
            var after = 0
            while true {
                let page = try store.failures(list: record.id, after: after, limit: 1000)
                guard let last = page.last else { break }
                // Keys as the items were requested: a chosen one, else from the stored
                // (normalised) URL — parsed again only when host tables leave query out of keys.
                let policy = downloader.keyPolicy
                downloader.forgetFailures(of: page.map { row in
                    if let chosen = row.failure.chosenKey { return CacheKey(chosen: chosen, owner: record.keyOwner) }
                    guard !policy.rules.isEmpty, let url = try? ImageURL(row.failure.url) else {
                        return CacheKey(normalizedURL: row.failure.url)
                    }
                    return policy.key(for: url)
                })
                after = last.seq
            }
            // Retired by the pruner since the lookup: as if it had not been found (its file stays
            // in failed/, no run is made for a list the database no longer has).
            guard let requeued = try store.requeueFailures(list: record.id) else { return .notFound }
            // Left failed: a retry cannot cure an expired signature (the reply says so).
            let expired = try store.failureCounts(list: record.id)[FailureCode.urlExpired.rawValue] ?? 0
            guard requeued > 0 else { return .requeued(0, expired: expired) }
            if turns.withLock({ $0.waiting.contains { $0.id == record.id } }) {
                // Waiting for its turn: it reads its pending URLs, these among them, when it starts.
                return .requeued(requeued, expired: expired)
            }
            if var run = runs[record.id] {
                run.cursor = 0
                run.expiringCursor = nil
                run.expiringRead = false
                run.exhausted = false
                run.cancelled = false
                runs[record.id] = run
            } else {
                // Finished: bring its file back into `.claimed/` (its old report goes). Its own file:
                // another list of the same name may have finished since, under the dropped name.
                let stem = record.finishedFile ?? SpoolEntryName.fileName(for: record.name)
                _ = folders.move(stem, from: folders.failed, to: folders.claimed, as: record.claimedFile)
                unlinkat(folders.failed, stem + ".report.json", 0)
                // Taken back like a list just claimed: it starts, or waits its turn.
                admit(record)
            }
            pump()
            return .requeued(requeued, expired: expired)
        }
    }

    /// The lists: in progress, then the last finished ones, most recent first; those waiting
    /// for their turn as `waiting`, with their position. Read from the database, not the spool's
    /// queue (which may be busy claiming a long list): counts can lag the last 100 ms of outcomes.
    public nonisolated func lists() throws(SQLiteError) -> [ListRecord] {
        markWaiting(try store.lists())
    }

    /// `records` with those waiting for their turn in state `waiting` and their position (the
    /// database has them `active`: claimed, to be warmed).
    nonisolated func markWaiting(_ records: [ListRecord]) -> [ListRecord] {
        let (positions, paused, gate, estimates) = turns.withLock { turns in
            // Positions count the lists that may start: a held one has none.
            var positions: [Int: Int] = [:]
            for record in turns.waiting where turns.gate.holding(record.name).isEmpty { positions[record.id] = positions.count + 1 }
            for record in turns.waiting where positions[record.id] == nil { positions[record.id] = 0 }
            return (positions, turns.paused, turns.gate, turns.estimates)
        }
        guard !positions.isEmpty || !paused.isEmpty || !estimates.isEmpty else { return records }
        return records.map { record in
            guard !record.state.isFinished else { return record }
            var marked = record
            marked.estimate = estimates[record.id]
            if paused.contains(record.id) {
                marked.state = .held
                marked.heldFor = gate.holding(record.name)
            } else if let position = positions[record.id] {
                if position == 0 {
                    marked.state = .held
                    marked.heldFor = gate.holding(record.name)
                } else {
                    marked.state = .waiting
                    marked.position = position
                }
            }
            return marked
        }
    }

    /// One page of the failures of the list named `name` (after `seq`, at most `limit`, each
    /// with its seq), or nil when there is no such list.
    public nonisolated func failures(list name: String, afterSeq seq: Int, limit: Int)
        throws(SQLiteError) -> [(seq: Int, failure: ListFailure)]?
    {
        guard let record = try store.lists(finishedLimit: 1000).first(where: { $0.name == name }) else { return nil }
        return try store.failures(list: record.id, after: seq, limit: limit)
    }

    /// Lists in progress (being claimed, warmed or waiting), of them those being warmed (at most
    /// `max-active-lists`) and those waiting for their turn, and the URLs of all of them settled
    /// and in all (for `status` and the status line). When the state database fails the lists
    /// count as none (logged once until it answers again): a status that lags is harmless, and
    /// the failure is the warming's to report.
    public nonisolated var progress: (lists: Int, warmed: Int, waiting: Int, settled: Int, total: Int) {
        let records: [ListRecord]
        do {
            records = try store.lists(finishedLimit: 0)
            if progressReadFailing.exchange(false, ordering: .relaxed) {
                logger.notice("the state database answers the status again")
            }
        } catch {
            records = []
            if !progressReadFailing.exchange(true, ordering: .relaxed) {
                logger.error("cannot read the lists in progress for the status from the state database, counting none: \(error)")
            }
        }
        let inProgress = records.filter { !$0.state.isFinished }
        // Both counts in one look, so a list that starts is counted once.
        let (warmed, waiting) = turns.withLock { ($0.warmed, $0.waiting.count) }
        return (
            inProgress.count, warmed, waiting, inProgress.reduce(0) { $0 + $1.total - $1.pending },
            inProgress.reduce(0) { $0 + $1.total }
        )
    }

    /// Lists being warmed and claimed lists waiting for their turn: ``progress``'s two counts
    /// without its read of the state database (for `metrics`, which may be asked often).
    public nonisolated var turnCounts: (warmed: Int, waiting: Int) {
        turns.withLock { ($0.warmed, $0.waiting.count) }
    }

    /// Returns once the spool's queue has run everything enqueued before (the watchdog's probe).
    public func respond() {}
}
