import ImgdCore
import ImgdStore

/// Claiming a list: its row, its lines recorded in slices, then active (or abandoned).
extension ListStore {
    /// The next list's id: above every id given before (`counters.last_list_id`), and above any
    /// id that still has anything in the database (a list row, URL rows, a `pruning` entry) —
    /// the latter for databases made before the counter. `lists.id` is a plain rowid, which
    /// SQLite would reuse after the newest row is deleted (an abandoned claim): the new list
    /// would then share the id whose URL rows the pruner is deleting, and lose its own.
    private static let nextListID = """
        SELECT max(
            coalesce((SELECT value FROM counters WHERE name = 'last_list_id'), 0),
            coalesce((SELECT max(id) FROM lists), 0),
            coalesce((SELECT max(list_id) FROM list_urls), 0),
            coalesce((SELECT max(list_id) FROM pruning), 0)) + 1
        """

    /// Starts claiming a list: its row, in state `claiming`, named `name` (with `~N` added when
    /// a list in progress has that name). Its file's name in `.claimed/` is `<id>.<file name>`,
    /// the file name shortened when long (``SpoolEntryName/fileName(for:)``: within NAME_MAX).
    /// `owner` is the uid that owns the file (it may cancel the list).
    public func beginClaim(fileName: String, format: String, pinMilliseconds: Int?, at time: Int, owner: UInt32? = nil)
        throws(SQLiteError) -> ListRecord
    {
        let id: Int = try connection.withLock { connection throws(SQLiteError) in
            try connection.transaction { () throws(SQLiteError) in
                var name = fileName
                let taken = try connection.statement(
                    "SELECT count(*) FROM lists WHERE name = ?1 AND state IN ('claiming', 'active')")
                var suffix = 1
                while true {
                    taken.reset()
                    taken.bind(1, name)
                    guard try taken.step(), taken.int(0) > 0 else { break }
                    suffix += 1
                    name = "\(fileName)~\(suffix)"
                }
                taken.reset()
                let next = try connection.statement(Self.nextListID)
                guard try next.step() else { throw SQLiteError(code: 1, message: "no next list id", context: "claim") }
                let id = next.int(0)
                next.reset()
                let remember = try connection.statement(
                    "INSERT OR REPLACE INTO counters (name, value) VALUES ('last_list_id', ?1)")
                remember.bind(1, id)
                try remember.step()
                let statement = try connection.statement("""
                    INSERT INTO lists (id, name, claimed_file, format, state, pin_ms, claimed_at, owner)
                    VALUES (?6, ?1, ?7, ?2, 'claiming', ?3, ?4, ?5)
                    """)
                defer { statement.reset() }
                statement.bind(1, name)
                statement.bind(2, format)
                statement.bind(3, pinMilliseconds)
                statement.bind(4, time)
                statement.bind(5, owner.map { Int($0) })
                statement.bind(6, id)
                statement.bind(7, "\(id).\(SpoolEntryName.fileName(for: fileName))")
                try statement.step()
                return id
            }
        }
        guard let record = try list(id) else { throw SQLiteError(code: 1, message: "list \(id) vanished", context: "claim") }
        return record
    }

    /// Records a slice of a list's lines (in one transaction): URLs as pending, bad lines as
    /// failed with their code and message.
    public func addLines(
        list: Int, _ lines: [(seq: Int, line: Int, url: String, failure: (code: String, message: String)?)]
    ) throws(SQLiteError) {
        try addLines(list: list, lines.map { ($0.seq, $0.line, $0.url, $0.failure, LinkListItemOptions.none) })
    }

    /// Records a slice of a list's lines (in one transaction): URLs as pending with their
    /// item's options (and the expiry a signed URL states), bad lines as failed with their code
    /// and message.
    public func addLines(
        list: Int,
        _ lines: [(seq: Int, line: Int, url: String, failure: (code: String, message: String)?, options: LinkListItemOptions)]
    ) throws(SQLiteError) {
        guard !lines.isEmpty else { return }
        try connection.withLock { connection throws(SQLiteError) in
            try connection.transaction { () throws(SQLiteError) in
                let insert = try connection.statement("""
                    INSERT OR REPLACE INTO list_urls (list_id, seq, line, url, state, code, message, item_key, sha256, pin_ms, high,
                        refresh, expires_ms, mirrors)
                    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)
                    """)
                var pending = 0
                var failed = 0
                for entry in lines {
                    insert.reset()
                    insert.bind(1, list)
                    insert.bind(2, entry.seq)
                    insert.bind(3, entry.line)
                    insert.bind(4, entry.url)
                    insert.bind(5, (entry.failure == nil ? URLState.pending : .failed).rawValue)
                    insert.bind(6, entry.failure?.code)
                    insert.bind(7, entry.failure?.message)
                    insert.bind(8, entry.options.key)
                    insert.bind(9, entry.options.sha256?.hex)
                    insert.bind(10, entry.options.pin.map { Int($0.components.seconds) * 1000 })
                    insert.bind(11, entry.options.isHighPriority ? 1 : nil)
                    insert.bind(12, entry.options.refresh?.description)
                    // A signed URL's expiry orders the pending reads (``pendingExpiringURLs``).
                    insert.bind(13, entry.failure == nil ? URLExpiry(urlText: entry.url)?.milliseconds : nil)
                    // Normalised URLs hold no line break.
                    insert.bind(14, entry.options.mirrors.isEmpty ? nil : entry.options.mirrors.map(\.normalized).joined(separator: "\n"))
                    try insert.step()
                    if entry.failure == nil { pending += 1 } else { failed += 1 }
                }
                let update = try connection.statement(
                    "UPDATE lists SET total = total + ?2, pending = pending + ?3, failed = failed + ?4 WHERE id = ?1")
                update.bind(1, list)
                update.bind(2, lines.count)
                update.bind(3, pending)
                update.bind(4, failed)
                try update.step()
            }
        }
    }

    /// Sets how long the list's images stay pinned once cached (its `# pin:` header).
    public func setPin(list: Int, milliseconds: Int) throws(SQLiteError) {
        try connection.withLock { connection throws(SQLiteError) in
            let statement = try connection.statement("UPDATE lists SET pin_ms = ?2 WHERE id = ?1")
            statement.bind(1, list)
            statement.bind(2, milliseconds)
            try statement.step()
        }
    }

    /// Sets when the list's cached images are due for revalidation (its `# refresh:` header).
    public func setRefresh(list: Int, rule: RefreshRule) throws(SQLiteError) {
        try connection.withLock { connection throws(SQLiteError) in
            let statement = try connection.statement("UPDATE lists SET refresh = ?2 WHERE id = ?1")
            defer { statement.reset() }
            statement.bind(1, list)
            statement.bind(2, rule.description)
            try statement.step()
        }
    }

    /// Sets when the list must be warmed by (wall-clock milliseconds): its `# ready-by:`, its
    /// JSON object's `ready_by`, or `add`'s.
    public func setReadyBy(list: Int, milliseconds: Int) throws(SQLiteError) {
        try connection.withLock { connection throws(SQLiteError) in
            let statement = try connection.statement("UPDATE lists SET ready_by_ms = ?2 WHERE id = ?1")
            defer { statement.reset() }
            statement.bind(1, list)
            statement.bind(2, milliseconds)
            try statement.step()
        }
    }

    /// The list's file is in `.claimed/`: it is active from now on.
    public func finishClaim(list: Int) throws(SQLiteError) {
        try setState(list, .active)
    }

    /// Forgets a claim that did not complete (the file is still in the spool and will be claimed
    /// anew): its row goes at once; its URL rows, which may be millions, are left to
    /// ``pruneBatch(limit:)``.
    public func abandonClaim(list: Int) throws(SQLiteError) {
        try connection.withLock { connection throws(SQLiteError) in
            try connection.transaction { () throws(SQLiteError) in
                for sql in ["INSERT OR IGNORE INTO pruning (list_id) VALUES (?1)", "DELETE FROM lists WHERE id = ?1"] {
                    let statement = try connection.statement(sql)
                    statement.bind(1, list)
                    try statement.step()
                }
            }
        }
    }

    /// Sets `list`'s state alone (the other transitions set more with it).
    private func setState(_ list: Int, _ state: ListState) throws(SQLiteError) {
        try connection.withLock { connection throws(SQLiteError) in
            let statement = try connection.statement("UPDATE lists SET state = ?2 WHERE id = ?1")
            statement.bind(1, list)
            statement.bind(2, state.rawValue)
            try statement.step()
        }
    }
}
