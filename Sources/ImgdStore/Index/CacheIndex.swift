import CSQLite
import ImgdCore

/// The cache's index: one SQLite row per entry, in `<cache>/index.sqlite` (WAL).
///
/// A row is written only after its file has been renamed into place, so a row never points at
/// a partial file (a crash can leave a file without a row, which the reconcile removes).
/// Lookups use their own connection, so they never queue behind a batch of writes; WAL lets
/// them read while a write commits. Access times are batched in memory and written in one
/// transaction by ``flushAccesses()`` (the owner calls it every few seconds and at shutdown).
///
/// Unclean shutdowns are detected with a flag set at open and cleared at ``close(syncedToDisk:)``:
/// after one, every row written before is marked as needing its SHA-256 checked before first use.
/// This costs nothing at start (a generation number is bumped, no row is touched). A close that
/// did not sync the files first is clean for the rest of the boot only (``BootIdentity``): a
/// start after a reboot treats it as unclean.
///
/// The two connections and the pending access times are each behind their own mutex.
public final class CacheIndex: Sendable {
    /// The index file.
    public let path: String
    /// False when the previous run did not close the index (a crash, kill -9, power loss), or
    /// closed it without syncing and the machine has restarted since
    /// (``previousStopUnsyncedBeforeRestart``).
    public let previousShutdownWasClean: Bool
    /// True when the previous run closed the index cleanly without syncing its files
    /// (`imgd prefetch`) and the machine has restarted since: entries are checked at first use.
    public let previousStopUnsyncedBeforeRestart: Bool
    /// Rows verified (or written) before this generation need verification.
    private let generation: Int
    let writer: Locked<SQLiteConnection>
    let reader: Locked<SQLiteConnection>
    private let pendingAccesses = Locked<[CacheKey: (time: Int, hits: Int)]>([:])

    /// Opens (creating if needed) the index at `path`.
    public init(path: String) throws(SQLiteError) {
        self.path = path
        let opened = try Self.open(path, carrying: nil)
        self.previousShutdownWasClean = opened.clean
        self.previousStopUnsyncedBeforeRestart = opened.unsyncedBeforeRestart
        self.generation = opened.generation
        self.writer = Locked(opened.writer)
        self.reader = Locked(try SQLiteConnection(path: path))
    }

    /// Opens the index file at ``path`` again, creating it empty if it is gone: the recovery
    /// when the cache folder was removed while imgd ran (the old connections would go on
    /// writing to a deleted file). Pending access times of the old file are dropped with it.
    public func reopen() throws(SQLiteError) {
        // Each connection is made inside its mutex: a connection is not Sendable, so it cannot be
        // made outside and handed in.
        let (path, generation) = (path, generation)
        try writer.withLock { connection throws(SQLiteError) in
            connection = try Self.open(path, carrying: generation).writer
        }
        try reader.withLock { connection throws(SQLiteError) in
            connection = try SQLiteConnection(path: path)
        }
        pendingAccesses.withLock { $0.removeAll() }
    }

    // MARK: - Reading

    /// The entry for `key`, or nil.
    public func entry(for key: CacheKey) throws(SQLiteError) -> IndexEntry? {
        try reader.withLock { connection throws(SQLiteError) in
            let statement = try connection.statement("SELECT \(Self.columns) FROM entries WHERE key = ?1")
            defer { statement.reset() }  // an unfinished statement would pin an old snapshot
            key.digest.bytes.withUnsafeBytes { statement.bind(1, bytes: $0) }
            guard try statement.step() else { return nil }
            return Self.entry(from: statement, generation: generation)
        }
    }

    /// The entries of those `keys` that have one, read in transactions of at most
    /// ``keysPerRead`` keys: one snapshot and one round of WAL locking per chunk, where a lookup
    /// each (a list of new URLs, all missing) would take the locks, and re-read the pages a
    /// write since has made stale, per key. Chunks keep a `get` waiting for the reader to about
    /// a millisecond at most.
    public func entries(for keys: [CacheKey]) throws(SQLiteError) -> [CacheKey: IndexEntry] {
        var found: [CacheKey: IndexEntry] = [:]
        var start = keys.startIndex
        while start < keys.endIndex {
            let chunk = keys[start..<min(start + Self.keysPerRead, keys.endIndex)]
            start = chunk.endIndex
            try reader.withLock { connection throws(SQLiteError) in
                try connection.execute("BEGIN")
                defer { try? connection.execute("COMMIT") }
                let statement = try connection.statement("SELECT \(Self.columns) FROM entries WHERE key = ?1")
                for key in chunk {
                    defer { statement.reset() }
                    key.digest.bytes.withUnsafeBytes { statement.bind(1, bytes: $0) }
                    if try statement.step(), let entry = Self.entry(from: statement, generation: generation) {
                        found[key] = entry
                    }
                }
            }
        }
        return found
    }

    /// Keys looked up per read transaction by ``entries(for:)``.
    static let keysPerRead = 64

    /// Up to `limit` entries with keys after `key` (all from the start when nil), in key order:
    /// a walk over the whole index in slices, each a short read.
    public func entries(after key: CacheKey?, limit: Int) throws(SQLiteError) -> [IndexEntry] {
        try reader.withLock { connection throws(SQLiteError) in
            let statement = try connection.statement(
                "SELECT \(Self.columns) FROM entries WHERE key > ?1 ORDER BY key LIMIT ?2")
            defer { statement.reset() }
            let start = key?.digest.bytes ?? []
            start.withUnsafeBytes { statement.bind(1, bytes: $0) }
            statement.bind(2, limit)
            var found: [IndexEntry] = []
            while try statement.step() {
                if let entry = Self.entry(from: statement, generation: generation) { found.append(entry) }
            }
            return found
        }
    }

    /// Up to `limit` eviction candidates, least recently used first: entries not pinned at `now`
    /// (milliseconds since 1970), and, when `accessedBefore` is given, last used before it.
    public func evictionCandidates(
        now: Int, accessedBefore: Int? = nil, limit: Int
    ) throws(SQLiteError) -> [(key: CacheKey, bytes: Int)] {
        // On the writer's connection: eviction is write-side work, and lookups must not queue
        // behind its queries on theirs.
        try writer.withLock { connection throws(SQLiteError) in
            let statement = try connection.statement("""
                SELECT key, bytes FROM entries
                WHERE last_access < ?3 AND (pinned_until IS NULL OR pinned_until <= ?1)
                ORDER BY last_access LIMIT ?2
                """)
            defer { statement.reset() }
            statement.bind(1, now)
            statement.bind(2, limit)
            statement.bind(3, accessedBefore ?? Int.max)
            var found: [(key: CacheKey, bytes: Int)] = []
            while try statement.step() {
                if let digest = SHA256Digest(bytes: statement.bytes(0)) {
                    found.append((CacheKey(digest: digest), statement.int(1)))
                }
            }
            return found
        }
    }

    /// Bytes of entries pinned at `now` (reported apart: they are never evicted).
    public func pinnedBytes(now: Int) throws(SQLiteError) -> Int {
        try reader.withLock { connection throws(SQLiteError) in
            let statement = try connection.statement(
                "SELECT coalesce(sum(bytes), 0) FROM entries WHERE pinned_until > ?1")
            defer { statement.reset() }
            statement.bind(1, now)
            return try statement.step() ? statement.int(0) : 0
        }
    }

    /// Pins `key` until `until` (milliseconds since 1970; nil unpins). A later pin never
    /// shortens an earlier one.
    public func pin(_ key: CacheKey, until: Int?) throws(SQLiteError) {
        try writer.withLock { connection throws(SQLiteError) in
            let statement = try connection.statement(until == nil
                ? "UPDATE entries SET pinned_until = NULL WHERE key = ?1"
                : "UPDATE entries SET pinned_until = max(coalesce(pinned_until, 0), ?2) WHERE key = ?1")
            key.digest.bytes.withUnsafeBytes { statement.bind(1, bytes: $0) }
            if let until { statement.bind(2, until) }
            try statement.step()
        }
    }

    /// Entries and bytes recorded, kept up to date by triggers (no scan).
    public func totals() throws(SQLiteError) -> (entries: Int, bytes: Int) {
        try reader.withLock { connection throws(SQLiteError) in
            let statement = try connection.statement("SELECT entries, bytes FROM totals WHERE id = 0")
            defer { statement.reset() }
            guard try statement.step() else { return (0, 0) }
            return (statement.int(0), statement.int(1))
        }
    }

    // MARK: - Writing

    /// Records `entries` (replacing rows with the same key) in one transaction. Returns by how
    /// many bytes the recorded total grew. `thenWhileLocked` runs once the transaction has
    /// committed, before any other write can start (not when it fails).
    @discardableResult
    public func insert(_ entries: [IndexEntry], thenWhileLocked afterCommit: () -> Void = {}) throws(SQLiteError) -> Int {
        guard !entries.isEmpty else {
            afterCommit()
            return 0
        }
        return try writer.withLock { connection throws(SQLiteError) in
            let grown = try connection.transaction { () throws(SQLiteError) in
                let before = try Self.totalBytes(connection)
                let statement = try connection.statement("""
                    INSERT INTO entries (key, url, bytes, sha256, format, width, height, etag, last_modified,
                        content_type, fetched_at, last_access, hit_count, pinned_until, verified_generation,
                        validated_at, fresh_until, cache_flags, owner)
                    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19)
                    ON CONFLICT (key) DO UPDATE SET url = excluded.url, bytes = excluded.bytes,
                        sha256 = excluded.sha256, format = excluded.format, width = excluded.width,
                        height = excluded.height, etag = excluded.etag, last_modified = excluded.last_modified,
                        content_type = excluded.content_type, fetched_at = excluded.fetched_at,
                        last_access = excluded.last_access, verified_generation = excluded.verified_generation,
                        validated_at = excluded.validated_at, fresh_until = excluded.fresh_until,
                        cache_flags = excluded.cache_flags
                    """)
                // `owner` is not in the update: a replaced row keeps the uid it is charged to.
                for entry in entries {
                    statement.reset()
                    entry.key.digest.bytes.withUnsafeBytes { statement.bind(1, bytes: $0) }
                    statement.bind(2, entry.url)
                    statement.bind(3, entry.bytes)
                    entry.sha256.bytes.withUnsafeBytes { statement.bind(4, bytes: $0) }
                    statement.bind(5, entry.format.rawValue)
                    statement.bind(6, entry.width)
                    statement.bind(7, entry.height)
                    statement.bind(8, entry.etag)
                    statement.bind(9, entry.lastModified)
                    statement.bind(10, entry.contentType)
                    statement.bind(11, entry.fetchedAt)
                    statement.bind(12, entry.lastAccess)
                    statement.bind(13, entry.hitCount)
                    statement.bind(14, entry.pinnedUntil)
                    statement.bind(15, generation)
                    statement.bind(16, entry.freshness.validatedAt)
                    statement.bind(17, entry.freshness.freshUntil)
                    statement.bind(18, Self.flags(of: entry.freshness))
                    statement.bind(19, entry.owner.map { Int($0) })
                    try statement.step()
                }
                return try Self.totalBytes(connection) - before
            }
            afterCommit()
            return grown
        }
    }

    /// Removes the rows of `keys` (their files are the caller's to delete, after this). Returns
    /// the bytes the removed rows recorded. `thenWhileLocked` runs once the transaction has
    /// committed, before any other write can start (not when it fails).
    @discardableResult
    public func remove(_ keys: [CacheKey], thenWhileLocked afterCommit: () -> Void = {}) throws(SQLiteError) -> Int {
        guard !keys.isEmpty else {
            afterCommit()
            return 0
        }
        return try writer.withLock { connection throws(SQLiteError) in
            let removed = try connection.transaction { () throws(SQLiteError) in
                let before = try Self.totalBytes(connection)
                let statement = try connection.statement("DELETE FROM entries WHERE key = ?1")
                for key in keys {
                    statement.reset()
                    key.digest.bytes.withUnsafeBytes { statement.bind(1, bytes: $0) }
                    try statement.step()
                }
                return before - (try Self.totalBytes(connection))
            }
            afterCommit()
            return removed
        }
    }

    /// The recorded total, read on `connection` (inside its transaction).
    private static func totalBytes(_ connection: SQLiteConnection) throws(SQLiteError) -> Int {
        let statement = try connection.statement("SELECT bytes FROM totals WHERE id = 0")
        defer { statement.reset() }
        return try statement.step() ? statement.int(0) : 0
    }

    /// Records that `key`'s entry was revalidated (a `304`): its freshness, and the validators
    /// the response sent when it sent any; the file and the rest of the row stay. Returns false
    /// when there is no such row (evicted meanwhile).
    @discardableResult
    public func updateFreshness(
        _ key: CacheKey, _ freshness: EntryFreshness, etag: String?, lastModified: String?
    ) throws(SQLiteError) -> Bool {
        try writer.withLock { connection throws(SQLiteError) in
            let statement = try connection.statement("""
                UPDATE entries SET validated_at = ?2, fresh_until = ?3, cache_flags = ?4,
                    etag = coalesce(?5, etag), last_modified = coalesce(?6, last_modified)
                WHERE key = ?1
                """)
            defer { statement.reset() }
            key.digest.bytes.withUnsafeBytes { statement.bind(1, bytes: $0) }
            statement.bind(2, freshness.validatedAt)
            statement.bind(3, freshness.freshUntil)
            statement.bind(4, Self.flags(of: freshness))
            statement.bind(5, etag)
            statement.bind(6, lastModified)
            try statement.step()
            return connection.changes > 0
        }
    }

    /// `cache_flags`: bit 0 `no-cache`, bit 1 `immutable`.
    private static func flags(of freshness: EntryFreshness) -> Int {
        (freshness.noCache ? 1 : 0) | (freshness.immutable ? 2 : 0)
    }

    /// Marks `key`'s content as checked in this generation.
    public func markVerified(_ key: CacheKey) throws(SQLiteError) {
        try writer.withLock { connection throws(SQLiteError) in
            let statement = try connection.statement("UPDATE entries SET verified_generation = ?2 WHERE key = ?1")
            key.digest.bytes.withUnsafeBytes { statement.bind(1, bytes: $0) }
            statement.bind(2, generation)
            try statement.step()
        }
    }

    /// Notes a hit on `key` at `time` (milliseconds since 1970); written by ``flushAccesses()``.
    public func recordAccess(_ key: CacheKey, at time: Int) {
        pendingAccesses.withLock { pending in
            let previous = pending[key]
            pending[key] = (max(time, previous?.time ?? 0), (previous?.hits ?? 0) + 1)
        }
    }

    /// Writes every pending access time in one transaction. Returns how many rows it touched.
    @discardableResult
    public func flushAccesses() throws(SQLiteError) -> Int {
        let pending = pendingAccesses.withLock { pending in
            defer { pending.removeAll() }
            return pending
        }
        guard !pending.isEmpty else { return 0 }
        return try writer.withLock { connection throws(SQLiteError) in
            try connection.transaction { () throws(SQLiteError) in
                let statement = try connection.statement(
                    "UPDATE entries SET last_access = max(last_access, ?2), hit_count = hit_count + ?3 WHERE key = ?1")
                var touched = 0
                for (key, access) in pending {
                    statement.reset()
                    key.digest.bytes.withUnsafeBytes { statement.bind(1, bytes: $0) }
                    statement.bind(2, access.time)
                    statement.bind(3, access.hits)
                    try statement.step()
                    touched += connection.changes
                }
                return touched
            }
        }
    }

    /// Flushes access times and records a clean shutdown. The index must not be used afterwards.
    ///
    /// - Parameter syncedToDisk: true when the files were synced to the disk just before (a
    ///   daemon's stop): the next start trusts them whenever it comes. False (`imgd prefetch`,
    ///   whose user waits for its exit): the stop is recorded as clean for this boot only
    ///   (``BootIdentity``; a start after a reboot, which a power cut before writeback would be,
    ///   checks entries before use). Requires ``BootIdentity/current``; without it a caller must
    ///   sync.
    public func close(syncedToDisk: Bool = true) throws(SQLiteError) {
        try flushAccesses()
        try writer.withLock { connection throws(SQLiteError) in
            try connection.transaction { () throws(SQLiteError) in
                try Self.setMeta(connection, "clean", 1)
                if syncedToDisk {
                    try Self.removeMeta(connection, Self.unsyncedBootKey)
                } else {
                    try Self.setMeta(connection, Self.unsyncedBootKey, BootIdentity.current ?? 0)
                }
            }
            // The index is left whole in its one file either way (a copy of the folder, or of the
            // file alone, needs no WAL beside it): its own fsyncs are few and small.
            try connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        }
    }

    /// The meta row naming the boot whose clean stop did not sync (absent after a synced stop).
    static let unsyncedBootKey = "unsynced_stop_boot"

    // MARK: - Rows

    /// Every column of `entries`, in the order ``entry(from:generation:)`` reads them.
    static let columns = """
        key, url, bytes, sha256, format, width, height, etag, last_modified, content_type, fetched_at,
        last_access, hit_count, pinned_until, verified_generation, validated_at, fresh_until, cache_flags, owner
        """

    private static func entry(from row: SQLiteStatement, generation: Int) -> IndexEntry? {
        guard let digest = SHA256Digest(bytes: row.bytes(0)), let sha = SHA256Digest(bytes: row.bytes(3)),
            let format = row.string(4).flatMap(ImageFormat.init(rawValue:))
        else { return nil }
        return IndexEntry(
            key: CacheKey(digest: digest), url: row.string(1) ?? "", bytes: row.int(2), sha256: sha, format: format,
            width: row.optionalInt(5), height: row.optionalInt(6), etag: row.string(7), lastModified: row.string(8),
            contentType: row.string(9), fetchedAt: row.int(10), lastAccess: row.int(11), hitCount: row.int(12),
            pinnedUntil: row.optionalInt(13), needsVerification: row.int(14) < generation,
            freshness: EntryFreshness(
                validatedAt: row.optionalInt(15) ?? row.int(10), freshUntil: row.optionalInt(16),
                noCache: row.int(17) & 1 != 0, immutable: row.int(17) & 2 != 0),
            owner: row.optionalInt(18).flatMap { UInt32(exactly: $0) })
    }

    static func meta(_ connection: SQLiteConnection, _ name: String) throws(SQLiteError) -> Int? {
        let statement = try connection.statement("SELECT value FROM meta WHERE name = ?1")
        defer { statement.reset() }
        statement.bind(1, name)
        return try statement.step() ? statement.int(0) : nil
    }

    static func removeMeta(_ connection: SQLiteConnection, _ name: String) throws(SQLiteError) {
        let statement = try connection.statement("DELETE FROM meta WHERE name = ?1")
        statement.bind(1, name)
        try statement.step()
    }

    static func setMeta(_ connection: SQLiteConnection, _ name: String, _ value: Int) throws(SQLiteError) {
        let statement = try connection.statement(
            "INSERT INTO meta (name, value) VALUES (?1, ?2) ON CONFLICT (name) DO UPDATE SET value = excluded.value")
        statement.bind(1, name)
        statement.bind(2, value)
        try statement.step()
    }
}
