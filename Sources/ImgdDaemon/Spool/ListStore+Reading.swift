import ImgdCore
import ImgdStore

/// What `lists`, `failures`, reports and `refresh --list` read.
extension ListStore {
    /// Lists, most recent first: every one not finished, and the last `finishedLimit` finished.
    public func lists(finishedLimit: Int = 100) throws(SQLiteError) -> [ListRecord] {
        try connection.withLock { connection throws(SQLiteError) in
            let statement = try connection.statement("""
                SELECT id, name, claimed_file, format, state, pin_ms, total, pending, cached, already_cached, failed,
                    bytes, claimed_at, finished_at, finished_file, owner, refresh, ready_by_ms FROM lists
                WHERE state IN ('claiming', 'active') OR id IN (
                    SELECT id FROM lists WHERE state NOT IN ('claiming', 'active') ORDER BY id DESC LIMIT ?1)
                ORDER BY id DESC
                """)
            defer { statement.reset() }
            statement.bind(1, finishedLimit)
            var found: [ListRecord] = []
            while try statement.step() {
                found.append(ListRecord(
                    id: statement.int(0), name: statement.string(1) ?? "", claimedFile: statement.string(2) ?? "",
                    format: statement.string(3) ?? "text", state: ListState(rawValue: statement.string(4) ?? "") ?? .failed,
                    pinMilliseconds: statement.optionalInt(5), total: statement.int(6), pending: statement.int(7),
                    cached: statement.int(8), alreadyCached: statement.int(9), failed: statement.int(10),
                    bytes: statement.int(11), claimedAt: statement.int(12), finishedAt: statement.optionalInt(13),
                    finishedFile: statement.string(14), owner: statement.optionalInt(15).flatMap { UInt32(exactly: $0) },
                    refresh: statement.string(16).flatMap { try? RefreshRule(parsing: $0) },
                    readyBy: statement.optionalInt(17)))
            }
            return found
        }
    }

    /// The URLs still pending in `owner`'s unfinished lists (dropped or added).
    public func pendingURLs(ownedBy owner: UInt32) throws(SQLiteError) -> Int {
        try connection.withLock { connection throws(SQLiteError) in
            let statement = try connection.statement(
                "SELECT coalesce(sum(pending), 0) FROM lists WHERE owner = ?1 AND state IN ('claiming', 'active')")
            defer { statement.reset() }
            statement.bind(1, Int(owner))
            guard try statement.step() else { return 0 }
            return statement.int(0)
        }
    }

    /// The uid that owned `list`'s file when it was claimed; nil when not recorded (or no such list).
    public func owner(ofList list: Int) throws(SQLiteError) -> UInt32? {
        try connection.withLock { connection throws(SQLiteError) in
            let statement = try connection.statement("SELECT owner FROM lists WHERE id = ?1")
            defer { statement.reset() }
            statement.bind(1, list)
            guard try statement.step() else { return nil }
            return statement.optionalInt(0).flatMap { UInt32(exactly: $0) }
        }
    }

    /// The list with `id`, if recorded.
    public func list(_ id: Int) throws(SQLiteError) -> ListRecord? {
        try lists(finishedLimit: Int.max).first { $0.id == id }
    }

    /// The failed URLs of `list`, in list order (at most `limit`).
    public func failures(list: Int, limit: Int = Int.max) throws(SQLiteError) -> [ListFailure] {
        try connection.withLock { connection throws(SQLiteError) in
            let statement = try connection.statement(
                "SELECT line, url, code, message FROM list_urls WHERE list_id = ?1 AND state = 3 ORDER BY seq LIMIT ?2")
            defer { statement.reset() }
            statement.bind(1, list)
            statement.bind(2, limit)
            var found: [ListFailure] = []
            while try statement.step() {
                found.append(ListFailure(
                    line: statement.int(0), url: statement.string(1) ?? "", code: statement.string(2) ?? "",
                    message: statement.string(3) ?? ""))
            }
            return found
        }
    }

    /// One page of `list`'s failed URLs, in list order: those after `seq` (the last one of the
    /// previous page; 0 for the first), at most `limit`, each with its seq (the next cursor).
    /// Read by the `(list_id, state, seq)` index: a page costs its own rows, wherever it starts.
    public func failures(list: Int, after seq: Int, limit: Int) throws(SQLiteError) -> [(seq: Int, failure: ListFailure)] {
        try connection.withLock { connection throws(SQLiteError) in
            let statement = try connection.statement(
                "SELECT seq, line, url, code, message, item_key FROM list_urls WHERE list_id = ?1 AND state = 3 AND seq > ?2 ORDER BY seq LIMIT ?3")
            defer { statement.reset() }
            statement.bind(1, list)
            statement.bind(2, seq)
            statement.bind(3, limit)
            var found: [(seq: Int, failure: ListFailure)] = []
            while try statement.step() {
                found.append((statement.int(0), ListFailure(
                    line: statement.int(1), url: statement.string(2) ?? "", code: statement.string(3) ?? "",
                    message: statement.string(4) ?? "", chosenKey: statement.string(5))))
            }
            return found
        }
    }

    /// One page of `list`'s items that failed `url_expired`, in list order: those after `seq`,
    /// at most `limit`, each with its seq, line, URL, the expiry read at the claim (nil when the
    /// URL states none: never for a claimed one) and its chosen key: what a dropper re-signs.
    public func expiredURLs(list: Int, after seq: Int, limit: Int) throws(SQLiteError)
        -> [(seq: Int, line: Int, url: String, expiresAt: Int?, chosenKey: String?)]
    {
        try connection.withLock { connection throws(SQLiteError) in
            let statement = try connection.statement("""
                SELECT seq, line, url, expires_ms, item_key FROM list_urls
                WHERE list_id = ?1 AND state = 3 AND code = 'url_expired' AND seq > ?2 ORDER BY seq LIMIT ?3
                """)
            defer { statement.reset() }
            statement.bind(1, list)
            statement.bind(2, seq)
            statement.bind(3, limit)
            var found: [(seq: Int, line: Int, url: String, expiresAt: Int?, chosenKey: String?)] = []
            while try statement.step() {
                found.append((
                    statement.int(0), statement.int(1), statement.string(2) ?? "", statement.optionalInt(3), statement.string(4)
                ))
            }
            return found
        }
    }

    /// `list`'s URLs that a mirror served (`line`, `url`, the mirror's URL), in list order, at
    /// most `limit`: read through the `(list_id, state, seq)` index, the cached rows only.
    public func servedByMirror(list: Int, limit: Int) throws(SQLiteError) -> [(line: Int, url: String, servedBy: String)] {
        try connection.withLock { connection throws(SQLiteError) in
            let statement = try connection.statement(
                "SELECT line, url, served_by FROM list_urls WHERE list_id = ?1 AND state = 1 AND served_by IS NOT NULL ORDER BY seq LIMIT ?2")
            defer { statement.reset() }
            statement.bind(1, list)
            statement.bind(2, limit)
            var found: [(line: Int, url: String, servedBy: String)] = []
            while try statement.step() {
                found.append((statement.int(0), statement.string(1) ?? "", statement.string(2) ?? ""))
            }
            return found
        }
    }

    /// Failure counts of `list` by error code.
    public func failureCounts(list: Int) throws(SQLiteError) -> [String: Int] {
        try connection.withLock { connection throws(SQLiteError) in
            let statement = try connection.statement(
                "SELECT code, count(*) FROM list_urls WHERE list_id = ?1 AND state = 3 GROUP BY code")
            defer { statement.reset() }
            statement.bind(1, list)
            var counts: [String: Int] = [:]
            while try statement.step() { counts[statement.string(0) ?? ""] = statement.int(1) }
            return counts
        }
    }

    /// The URLs of `list` that are cached (by it or before it), each with its chosen key: what
    /// `refresh --list` revalidates. At most `limit`.
    public func cachedURLs(list: Int, limit: Int) throws(SQLiteError) -> [(url: String, key: String?)] {
        try connection.withLock { connection throws(SQLiteError) in
            let statement = try connection.statement(
                "SELECT url, item_key FROM list_urls WHERE list_id = ?1 AND state IN (1, 2) ORDER BY seq LIMIT ?2")
            defer { statement.reset() }
            statement.bind(1, list)
            statement.bind(2, limit)
            var found: [(url: String, key: String?)] = []
            while try statement.step() { found.append((statement.string(0) ?? "", statement.string(1))) }
            return found
        }
    }
}
