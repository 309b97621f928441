import ImgdStore
import Synchronization

/// Keeping the database bounded: retiring finished lists, deleting their URL rows a batch at a
/// time, and giving the freed pages back to the filesystem.
extension ListStore {
    /// Retires the finished lists older than the last `keeping` (in the order `lists` shows
    /// them): their rows go, their URL rows are left to ``pruneBatch(limit:)``. Returns how many.
    @discardableResult
    public func retireFinishedLists(keeping: Int = ListStore.keptFinishedLists) throws(SQLiteError) -> Int {
        try connection.withLock { connection throws(SQLiteError) in
            try connection.transaction { () throws(SQLiteError) in
                let retire = try connection.statement("""
                    INSERT OR IGNORE INTO pruning (list_id)
                    SELECT id FROM lists WHERE state NOT IN ('claiming', 'active') ORDER BY id DESC LIMIT -1 OFFSET ?1
                    """)
                retire.bind(1, keeping)
                try retire.step()
                let retired = connection.changes
                guard retired > 0 else { return 0 }
                try connection.statement("DELETE FROM lists WHERE id IN (SELECT list_id FROM pruning)").step()
                return retired
            }
        }
    }

    /// Deletes up to `limit` URL rows of a retired list (one transaction, so the lock is held
    /// briefly). Returns false when no retired list has rows left.
    public func pruneBatch(limit: Int) throws(SQLiteError) -> Bool {
        try connection.withLock { connection throws(SQLiteError) in
            try connection.transaction { () throws(SQLiteError) in
                let next = try connection.statement("SELECT list_id FROM pruning ORDER BY list_id LIMIT 1")
                guard try next.step() else { return false }
                let list = next.int(0)
                next.reset()
                let delete = try connection.statement("""
                    DELETE FROM list_urls WHERE list_id = ?1 AND seq IN (
                        SELECT seq FROM list_urls WHERE list_id = ?1 ORDER BY seq LIMIT ?2)
                    """)
                delete.bind(1, list)
                delete.bind(2, limit)
                try delete.step()
                if connection.changes < limit {
                    let done = try connection.statement("DELETE FROM pruning WHERE list_id = ?1")
                    done.bind(1, list)
                    try done.step()
                }
                return true
            }
        }
    }

    /// Gives up to `pages` free pages back to the filesystem. Returns true while free pages
    /// remain (always false when the database does not reclaim space).
    public func reclaimSpace(pages: Int) throws(SQLiteError) -> Bool {
        guard reclaimsSpace else { return false }
        return try connection.withLock { connection throws(SQLiteError) in
            try connection.execute("PRAGMA incremental_vacuum(\(pages))")
            let free = try connection.statement("PRAGMA freelist_count")
            defer { free.reset() }
            return try free.step() && free.int(0) > 0
        }
    }

    /// Writes the WAL back into the database and empties it, syncing both: after a pass of
    /// pruning, so the deletes do not stay in the WAL until the next automatic checkpoint, and
    /// before a claimed list leaves the spool, so its URLs are on disk before its file moves.
    public func checkpoint() throws(SQLiteError) {
        try connection.withLock { connection throws(SQLiteError) in
            try connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        }
    }

    /// Bytes the database holds, in pages in use and free pages (the main file; not its WAL).
    public func size() throws(SQLiteError) -> (used: Int, free: Int) {
        try connection.withLock { connection throws(SQLiteError) in
            var values: [Int] = []
            for pragma in ["PRAGMA page_count", "PRAGMA freelist_count", "PRAGMA page_size"] {
                let statement = try connection.statement(pragma)
                defer { statement.reset() }
                values.append(try statement.step() ? statement.int(0) : 0)
            }
            return ((values[0] - values[1]) * values[2], values[1] * values[2])
        }
    }

    /// Rewrites a database made before pruning existed (`auto_vacuum = NONE`) so that it can give
    /// space back: a `VACUUM`, which copies every page in use and holds the database while it
    /// runs. Call it once no retired list has rows left, so what is copied is what is kept.
    public func convertToIncrementalVacuum() throws(SQLiteError) {
        try connection.withLock { connection throws(SQLiteError) in
            // The WAL then holds a copy of every page: cut it back at once.
            try connection.execute("PRAGMA auto_vacuum = INCREMENTAL; VACUUM; PRAGMA wal_checkpoint(TRUNCATE);")
            incremental.store(try Self.autoVacuumIsIncremental(connection), ordering: .relaxed)
        }
    }

    /// Whether `connection`'s database has `auto_vacuum = INCREMENTAL` (2).
    static func autoVacuumIsIncremental(_ connection: SQLiteConnection) throws(SQLiteError) -> Bool {
        let mode = try connection.statement("PRAGMA auto_vacuum")
        defer { mode.reset() }
        return try mode.step() && mode.int(0) == 2
    }
}
