import ImgdCore
import ImgdStore
import Synchronization

/// Where a list is in its life.
public enum ListState: String, Sendable, Equatable, CaseIterable {
    /// Its URLs are being recorded; the file is still in the spool.
    case claiming
    /// Recorded, file in `spool/.claimed/`; URLs being fetched.
    case active
    /// Recorded, file in `spool/.claimed/`, waiting for its turn: `max-active-lists` lists are
    /// being warmed. Never stored: the database has such a list as `active` (it is to be
    /// warmed, and resumes as such); ``SpoolService/lists()`` shows it so.
    case waiting
    /// Every URL cached.
    case done
    /// Finished with at least one failure.
    case failed
    /// Withdrawn by `cancel`.
    case cancelled

    /// True once nothing more will happen to it.
    public var isFinished: Bool { self == .done || self == .failed || self == .cancelled }
}

/// One list as the state database records it.
public struct ListRecord: Sendable, Equatable {
    public let id: Int
    /// The name it was dropped under (made unique among lists still in progress).
    public let name: String
    /// Its file's name in `spool/.claimed/`.
    public let claimedFile: String
    public let format: String
    public var state: ListState
    /// Its images are pinned this long after they are cached, when set (milliseconds).
    public let pinMilliseconds: Int?
    public var total: Int
    public var pending: Int
    public var cached: Int
    public var alreadyCached: Int
    public var failed: Int
    public var bytes: Int
    /// Wall-clock milliseconds.
    public let claimedAt: Int
    public var finishedAt: Int?
    /// Its file's name in `done/` or `failed/` once finished (the dropped name, or `NAME.N.ext`
    /// when that was taken there).
    public var finishedFile: String? = nil
    /// The uid that owned its file when it was claimed: that user may `cancel` it. Nil for
    /// lists claimed before this was recorded (only the privileged may cancel those).
    public var owner: UInt32? = nil
    /// Its `# refresh:` header: when its cached images are due for revalidation, over the
    /// daemon's `refresh`; nil when it has none.
    public var refresh: RefreshRule? = nil
    /// Its place among the lists waiting for their turn (1 starts next) when ``state`` is
    /// ``ListState/waiting``; nil otherwise. Not stored.
    public var position: Int? = nil

    /// The uid in whose namespace its items' chosen keys live (``CacheKey/init(chosen:owner:)``):
    /// its owner's, or, for a list claimed before owners were recorded, `UInt32.max`, which no
    /// member has (so such a list's chosen keys are nobody's to share).
    public var keyOwner: UInt32 { owner ?? .max }
}

/// How one URL of a list ended.
public enum ListURLOutcome: Sendable, Equatable {
    /// Downloaded for this list.
    case cached(bytes: Int)
    /// Was in the cache already.
    case alreadyCached(bytes: Int)
    case failed(code: String, message: String)
}

/// A URL of a list that failed, for the report.
public struct ListFailure: Sendable, Equatable {
    public let line: Int
    public let url: String
    public let code: String
    public let message: String
    /// The key its item chose, if it did (an object item's `key`).
    public var chosenKey: String? = nil
}

/// The daemon's state database (`<state>/imgd-state.sqlite`, WAL): the lists it has claimed
/// and every URL of each, with how it ended.
///
/// This is what makes a claimed list survive anything: its URLs are in here before the file
/// leaves the spool, and each outcome is written (in batches) as it arrives, so after a crash
/// a list resumes with the URLs still pending. Per-list counters are kept in the list's row, so
/// `lists` never counts a million rows. One connection, behind a mutex.
///
/// It stays bounded: only the last ``keptFinishedLists`` finished lists are kept (what `lists`
/// shows). An older one is retired (its row goes at once, its id to `pruning`) and its URL rows
/// are deleted a batch at a time (``pruneBatch(limit:)``), off the path of claims and outcomes;
/// the pages they held go back to the filesystem (``reclaimSpace(pages:)``, incremental vacuum).
public final class ListStore: Sendable {
    /// Finished lists kept with their URLs (the ones `lists` shows, most recent first): 100.
    public static let keptFinishedLists = 100

    private let connection: Locked<SQLiteConnection>
    /// Whether the database returns freed pages to the filesystem (`auto_vacuum = INCREMENTAL`).
    public var reclaimsSpace: Bool { incremental.load(ordering: .relaxed) }
    private let incremental: Atomic<Bool>

    private static let schema = """
        CREATE TABLE IF NOT EXISTS lists (
            id INTEGER PRIMARY KEY,
            name TEXT NOT NULL,
            claimed_file TEXT NOT NULL,
            format TEXT NOT NULL,
            state TEXT NOT NULL,
            pin_ms INTEGER,
            total INTEGER NOT NULL DEFAULT 0,
            pending INTEGER NOT NULL DEFAULT 0,
            cached INTEGER NOT NULL DEFAULT 0,
            already_cached INTEGER NOT NULL DEFAULT 0,
            failed INTEGER NOT NULL DEFAULT 0,
            bytes INTEGER NOT NULL DEFAULT 0,
            claimed_at INTEGER NOT NULL,
            finished_at INTEGER,
            finished_file TEXT,
            owner INTEGER,
            refresh TEXT
        );
        CREATE TABLE IF NOT EXISTS list_urls (
            list_id INTEGER NOT NULL,
            seq INTEGER NOT NULL,
            line INTEGER NOT NULL,
            url TEXT NOT NULL,
            state INTEGER NOT NULL,
            code TEXT,
            message TEXT,
            bytes INTEGER,
            item_key TEXT,
            sha256 TEXT,
            pin_ms INTEGER,
            high INTEGER,
            refresh TEXT,
            PRIMARY KEY (list_id, seq)
        ) WITHOUT ROWID;
        CREATE INDEX IF NOT EXISTS list_urls_by_state ON list_urls(list_id, state, seq);
        CREATE TABLE IF NOT EXISTS pruning (list_id INTEGER PRIMARY KEY);
        CREATE TABLE IF NOT EXISTS counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
        """

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

    /// `list_urls.state` values.
    private enum URLState: Int {
        case pending = 0, cached = 1, alreadyCached = 2, failed = 3
    }

    /// Opens (creating if needed) the database at `path`.
    public init(path: String) throws(SQLiteError) {
        let connection = try SQLiteConnection(path: path)
        // Before anything is written: auto_vacuum can only be chosen for an empty database. One
        // made by an earlier version keeps NONE (freed pages are reused, not given back) until
        // ``convertToIncrementalVacuum()``.
        let empty = try connection.statement("SELECT count(*) FROM sqlite_master")
        let isNew = try empty.step() && empty.int(0) == 0
        empty.reset()
        if isNew { try connection.execute("PRAGMA auto_vacuum = INCREMENTAL") }
        // NORMAL: a commit survives the process dying (kill -9, a crash) without an fsync per
        // batch; only a power cut can lose the last commits, and then lists resume a little
        // earlier (what was cached is found in the cache, not fetched again).
        // journal_size_limit: the WAL file is cut back to 64 MiB after a checkpoint, not left at
        // the size the largest claim grew it to.
        try connection.execute("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA journal_size_limit = 67108864;")
        try connection.execute(Self.schema)
        incremental = Atomic(try Self.autoVacuumIsIncremental(connection))
        // Databases made before `finished_file` existed get the column (NULL: the dropped name).
        if (try? connection.statement("SELECT finished_file FROM lists LIMIT 0")) == nil {
            try connection.execute("ALTER TABLE lists ADD COLUMN finished_file TEXT")
        }
        // And before `owner` (NULL: unknown, so only root, imgd and admin-group may cancel them).
        if (try? connection.statement("SELECT owner FROM lists LIMIT 0")) == nil {
            try connection.execute("ALTER TABLE lists ADD COLUMN owner INTEGER")
        }
        // And before object items' options (NULL: a plain URL).
        if (try? connection.statement("SELECT item_key FROM list_urls LIMIT 0")) == nil {
            try connection.execute("""
                ALTER TABLE list_urls ADD COLUMN item_key TEXT;
                ALTER TABLE list_urls ADD COLUMN sha256 TEXT;
                ALTER TABLE list_urls ADD COLUMN pin_ms INTEGER;
                ALTER TABLE list_urls ADD COLUMN high INTEGER;
                """)
        }
        // And before freshness rules, the list's `# refresh:` and an item's `refresh` (NULL: none).
        if (try? connection.statement("SELECT refresh FROM lists LIMIT 0")) == nil {
            try connection.execute("ALTER TABLE lists ADD COLUMN refresh TEXT")
        }
        if (try? connection.statement("SELECT refresh FROM list_urls LIMIT 0")) == nil {
            try connection.execute("ALTER TABLE list_urls ADD COLUMN refresh TEXT")
        }
        // The high-priority items still pending, read before the rest: a partial index, so a
        // list without any costs nothing.
        try connection.execute("CREATE INDEX IF NOT EXISTS list_urls_high ON list_urls(list_id, seq) WHERE high = 1 AND state = 0")
        self.connection = Locked(connection)
    }

    // MARK: - Claiming

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
    /// item's options, bad lines as failed with their code and message.
    public func addLines(
        list: Int,
        _ lines: [(seq: Int, line: Int, url: String, failure: (code: String, message: String)?, options: LinkListItemOptions)]
    ) throws(SQLiteError) {
        guard !lines.isEmpty else { return }
        try connection.withLock { connection throws(SQLiteError) in
            try connection.transaction { () throws(SQLiteError) in
                let insert = try connection.statement("""
                    INSERT OR REPLACE INTO list_urls (list_id, seq, line, url, state, code, message, item_key, sha256, pin_ms, high,
                        refresh)
                    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)
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

    // MARK: - Pruning

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
    private static func autoVacuumIsIncremental(_ connection: SQLiteConnection) throws(SQLiteError) -> Bool {
        let mode = try connection.statement("PRAGMA auto_vacuum")
        defer { mode.reset() }
        return try mode.step() && mode.int(0) == 2
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

    // MARK: - Progress

    /// Up to `limit` pending URLs of `list` after `seq`, in list order: the items marked
    /// `high` when `high` is true, the others when false.
    public func pendingURLs(list: Int, after seq: Int, limit: Int, high: Bool = false) throws(SQLiteError) -> [PendingURL] {
        try connection.withLock { connection throws(SQLiteError) in
            let statement = try connection.statement(
                high
                    ? """
                    SELECT seq, url, item_key, sha256, pin_ms, refresh FROM list_urls INDEXED BY list_urls_high
                    WHERE list_id = ?1 AND high = 1 AND state = 0 AND seq > ?2 ORDER BY seq LIMIT ?3
                    """
                    : """
                    SELECT seq, url, item_key, sha256, pin_ms, refresh FROM list_urls
                    WHERE list_id = ?1 AND state = 0 AND seq > ?2 AND high IS NULL ORDER BY seq LIMIT ?3
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
                found.append(PendingURL(seq: statement.int(0), url: statement.string(1) ?? "", options: options))
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
                    "UPDATE list_urls SET state = ?3, code = ?4, message = ?5, bytes = ?6 WHERE list_id = ?1 AND seq = ?2 AND state = 0")
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
                    case .cached(let bytes):
                        update.bind(3, URLState.cached.rawValue)
                        update.bind(4, nil as String?)
                        update.bind(5, nil as String?)
                        update.bind(6, bytes)
                        counts = (1, 0, 0, bytes)
                    case .alreadyCached(let bytes):
                        update.bind(3, URLState.alreadyCached.rawValue)
                        update.bind(4, nil as String?)
                        update.bind(5, nil as String?)
                        update.bind(6, bytes)
                        counts = (0, 1, 0, 0)
                    case .failed(let code, let message):
                        update.bind(3, URLState.failed.rawValue)
                        update.bind(4, code)
                        update.bind(5, message)
                        update.bind(6, nil as Int?)
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
    /// syntax, which would fail the same way) and forgets the name its file had in `done/` or
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
                    "UPDATE list_urls SET state = 0, code = NULL, message = NULL WHERE list_id = ?1 AND state = 3 AND code NOT IN ('bad_url', 'bad_list')")
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

    private func setState(_ list: Int, _ state: ListState) throws(SQLiteError) {
        try connection.withLock { connection throws(SQLiteError) in
            let statement = try connection.statement("UPDATE lists SET state = ?2 WHERE id = ?1")
            statement.bind(1, list)
            statement.bind(2, state.rawValue)
            try statement.step()
        }
    }

    // MARK: - Reading

    /// Lists, most recent first: every one not finished, and the last `finishedLimit` finished.
    public func lists(finishedLimit: Int = 100) throws(SQLiteError) -> [ListRecord] {
        try connection.withLock { connection throws(SQLiteError) in
            let statement = try connection.statement("""
                SELECT id, name, claimed_file, format, state, pin_ms, total, pending, cached, already_cached, failed,
                    bytes, claimed_at, finished_at, finished_file, owner, refresh FROM lists
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
                    refresh: statement.string(16).flatMap { try? RefreshRule(parsing: $0) }))
            }
            return found
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
}
