import ImgdCore
import ImgdStore

/// A list's progress: the pending URLs to fetch, the outcomes as they arrive, a cancel, a retry
/// of the failures, the end.
extension ListStore {
    /// Up to `limit` pending URLs of `list` after `seq`, in list order: the items marked
    /// `high` when `high` is true, the others whose URL states no expiry when false (those that
    /// do are read by ``pendingExpiringURLs(list:after:limit:)``).
    public func pendingURLs(list: Int, after seq: Int, limit: Int, high: Bool = false) throws(SQLiteError) -> [PendingURL] {
        try connection.withLock { connection throws(SQLiteError) in
            let statement = try connection.statement(
                high
                    ? """
                    SELECT seq, url, item_key, sha256, pin_ms, refresh, mirrors FROM list_urls INDEXED BY list_urls_high
                    WHERE list_id = ?1 AND high = 1 AND state = 0 AND seq > ?2 ORDER BY seq LIMIT ?3
                    """
                    : """
                    SELECT seq, url, item_key, sha256, pin_ms, refresh, mirrors FROM list_urls
                    WHERE list_id = ?1 AND state = 0 AND seq > ?2 AND high IS NULL AND expires_ms IS NULL ORDER BY seq LIMIT ?3
                    """)
            defer { statement.reset() }
            statement.bind(1, list)
            statement.bind(2, seq)
            statement.bind(3, limit)
            var found: [PendingURL] = []
            while try statement.step() {
                var options = LinkListItemOptions(isHighPriority: high)
                options.key = statement.string(2)
                options.sha256 = statement.string(3).flatMap(SHA256Digest.init(hex:))
                options.pin = statement.optionalInt(4).map { .milliseconds($0) }
                options.refresh = statement.string(5).flatMap { try? RefreshRule(parsing: $0) }
                options.mirrors = statement.string(6).map { $0.split(separator: "\n").compactMap { try? ImageURL(String($0)) } } ?? []
                found.append(PendingURL(seq: statement.int(0), url: statement.string(1) ?? "", options: options))
            }
            return found
        }
    }

    /// Up to `limit` pending URLs of `list` not marked `high` whose URL states an expiry, soonest
    /// first (list order among equals), after `cursor` (the last one read: its expiry and seq;
    /// nil for the first read). Read by their partial index: a list without any costs one probe.
    public func pendingExpiringURLs(list: Int, after cursor: (expiresAt: Int, seq: Int)?, limit: Int) throws(SQLiteError) -> [PendingURL] {
        try connection.withLock { connection throws(SQLiteError) in
            let statement = try connection.statement("""
                SELECT seq, url, item_key, sha256, pin_ms, refresh, expires_ms, mirrors FROM list_urls INDEXED BY list_urls_expiring
                WHERE list_id = ?1 AND state = 0 AND high IS NULL AND expires_ms IS NOT NULL AND (expires_ms, seq) > (?2, ?3)
                ORDER BY expires_ms, seq LIMIT ?4
                """)
            defer { statement.reset() }
            statement.bind(1, list)
            statement.bind(2, cursor?.expiresAt ?? Int.min)
            statement.bind(3, cursor?.seq ?? Int.min)
            statement.bind(4, limit)
            var found: [PendingURL] = []
            while try statement.step() {
                var options = LinkListItemOptions(isHighPriority: false)
                options.key = statement.string(2)
                options.sha256 = statement.string(3).flatMap(SHA256Digest.init(hex:))
                options.pin = statement.optionalInt(4).map { .milliseconds($0) }
                options.refresh = statement.string(5).flatMap { try? RefreshRule(parsing: $0) }
                options.mirrors = statement.string(7).map { $0.split(separator: "\n").compactMap { try? ImageURL(String($0)) } } ?? []
                found.append(PendingURL(
                    seq: statement.int(0), url: statement.string(1) ?? "", options: options, expiresAt: statement.optionalInt(6)))
            }
            return found
        }
    }

    /// Writes a batch of outcomes (one transaction) and updates each list's counters. An
    /// outcome for a URL no longer pending (answered twice, or its list was cancelled) is ignored.
    public func record(_ outcomes: [(list: Int, seq: Int, outcome: ListURLOutcome)]) throws(SQLiteError) {
        guard !outcomes.isEmpty else { return }
        try connection.withLock { connection throws(SQLiteError) in
            try connection.transaction { () throws(SQLiteError) in
                let update = try connection.statement(
                    "UPDATE list_urls SET state = ?3, code = ?4, message = ?5, bytes = ?6, served_by = ?7 WHERE list_id = ?1 AND seq = ?2 AND state = 0")
                let count = try connection.statement("""
                    UPDATE lists SET pending = pending - ?6, cached = cached + ?2, already_cached = already_cached + ?3,
                        failed = failed + ?4, bytes = bytes + ?5 WHERE id = ?1
                    """)
                // Each list's counters change once per batch, by the sum of its outcomes.
                var sums: [Int: (answered: Int, cached: Int, already: Int, failed: Int, bytes: Int)] = [:]
                for item in outcomes {
                    update.reset()
                    update.bind(1, item.list)
                    update.bind(2, item.seq)
                    var counts = (cached: 0, already: 0, failed: 0, bytes: 0)
                    switch item.outcome {
                    case .cached(let bytes, let servedBy):
                        update.bind(3, URLState.cached.rawValue)
                        update.bind(4, nil as String?)
                        update.bind(5, nil as String?)
                        update.bind(6, bytes)
                        update.bind(7, servedBy)
                        counts = (1, 0, 0, bytes)
                    case .alreadyCached(let bytes):
                        update.bind(3, URLState.alreadyCached.rawValue)
                        update.bind(4, nil as String?)
                        update.bind(5, nil as String?)
                        update.bind(6, bytes)
                        update.bind(7, nil as String?)
                        counts = (0, 1, 0, 0)
                    case .failed(let code, let message):
                        update.bind(3, URLState.failed.rawValue)
                        update.bind(4, code)
                        update.bind(5, message)
                        update.bind(6, nil as Int?)
                        update.bind(7, nil as String?)
                        counts = (0, 0, 1, 0)
                    }
                    try update.step()
                    guard connection.changes == 1 else { continue }
                    var sum = sums[item.list] ?? (0, 0, 0, 0, 0)
                    sum.answered += 1
                    sum.cached += counts.cached
                    sum.already += counts.already
                    sum.failed += counts.failed
                    sum.bytes += counts.bytes
                    sums[item.list] = sum
                }
                for (list, sum) in sums {
                    count.reset()
                    count.bind(1, list)
                    count.bind(2, sum.cached)
                    count.bind(3, sum.already)
                    count.bind(4, sum.failed)
                    count.bind(5, sum.bytes)
                    count.bind(6, sum.answered)
                    try count.step()
                }
            }
        }
    }

    /// Marks every pending URL of `list` failed with `code` (a cancelled list). Returns how many.
    @discardableResult
    public func failPending(list: Int, code: String, message: String) throws(SQLiteError) -> Int {
        try connection.withLock { connection throws(SQLiteError) in
            try connection.transaction { () throws(SQLiteError) in
                let update = try connection.statement(
                    "UPDATE list_urls SET state = 3, code = ?2, message = ?3 WHERE list_id = ?1 AND state = 0")
                update.bind(1, list)
                update.bind(2, code)
                update.bind(3, message)
                try update.step()
                let changed = connection.changes
                let count = try connection.statement(
                    "UPDATE lists SET pending = pending - ?2, failed = failed + ?2 WHERE id = ?1")
                count.bind(1, list)
                count.bind(2, changed)
                try count.step()
                return changed
            }
        }
    }

    /// Puts the failed URLs of `list` back to pending (except bad lines and a broken list's
    /// syntax, which would fail the same way, and expired URLs, which only a re-signed URL cures) and forgets the name its file had in `done/` or
    /// `failed/` (it finishes again under the first free one). Returns how many, or nil when the
    /// list is not recorded any more: retired by the pruner since it was looked up (its URL rows
    /// may still be there, being deleted; they are left alone). The check and the requeue are one
    /// transaction, so a list is either requeued (and `active`: never retired) or not touched.
    public func requeueFailures(list: Int) throws(SQLiteError) -> Int? {
        try connection.withLock { connection throws(SQLiteError) in
            try connection.transaction { () throws(SQLiteError) -> Int? in
                let recorded = try connection.statement(
                    "SELECT 1 FROM lists WHERE id = ?1 AND id NOT IN (SELECT list_id FROM pruning)")
                recorded.bind(1, list)
                let found = try recorded.step()
                recorded.reset()
                guard found else { return nil }
                let update = try connection.statement(
                    "UPDATE list_urls SET state = 0, code = NULL, message = NULL WHERE list_id = ?1 AND state = 3 AND code NOT IN ('bad_url', 'bad_list', 'url_expired')")
                update.bind(1, list)
                try update.step()
                let changed = connection.changes
                // Nothing to fetch again: the list stays finished.
                guard changed > 0 else { return 0 }
                let count = try connection.statement(
                    "UPDATE lists SET pending = pending + ?2, failed = failed - ?2, state = 'active', finished_at = NULL, finished_file = NULL WHERE id = ?1")
                count.bind(1, list)
                count.bind(2, changed)
                try count.step()
                return changed
            }
        }
    }

    /// The list is finished; its file is `file` in `done/` or `failed/`.
    public func finish(list: Int, state: ListState, at time: Int, file: String) throws(SQLiteError) {
        try connection.withLock { connection throws(SQLiteError) in
            let statement = try connection.statement(
                "UPDATE lists SET state = ?2, finished_at = ?3, finished_file = ?4 WHERE id = ?1")
            statement.bind(1, list)
            statement.bind(2, state.rawValue)
            statement.bind(3, time)
            statement.bind(4, file)
            try statement.step()
        }
    }

    /// Records the name `list`'s file will have in `done/` or `failed/`, before it moves there:
    /// a kill between the move and the report then finds, at the restart, which file is its.
    public func setFinishedFile(list: Int, file: String) throws(SQLiteError) {
        try connection.withLock { connection throws(SQLiteError) in
            let statement = try connection.statement("UPDATE lists SET finished_file = ?2 WHERE id = ?1")
            statement.bind(1, list)
            statement.bind(2, file)
            try statement.step()
        }
    }
}
