import ImgdCore
import ImgdStore
import Synchronization

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
///
/// Here: the schema and opening. The rest by facet: `ListStore+Claiming.swift`,
/// `+Progress` (pending URLs and outcomes), `+Reading` (`lists`, failures), `+Pruning`.
public final class ListStore: Sendable {
    /// Finished lists kept with their URLs (the ones `lists` shows, most recent first): 100.
    public static let keptFinishedLists = 100

    /// The one connection; each facet takes it for one statement or one transaction.
    let connection: Locked<SQLiteConnection>
    /// Whether the database returns freed pages to the filesystem (`auto_vacuum = INCREMENTAL`).
    public var reclaimsSpace: Bool { incremental.load(ordering: .relaxed) }
    let incremental: Atomic<Bool>

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
            refresh TEXT,
            sitemap TEXT,
            ready_by_ms INTEGER
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
            expires_ms INTEGER,
            mirrors TEXT,
            served_by TEXT,
            PRIMARY KEY (list_id, seq)
        ) WITHOUT ROWID;
        CREATE INDEX IF NOT EXISTS list_urls_by_state ON list_urls(list_id, state, seq);
        CREATE TABLE IF NOT EXISTS pruning (list_id INTEGER PRIMARY KEY);
        CREATE TABLE IF NOT EXISTS counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
        """

    /// `list_urls.state` values.
    enum URLState: Int {
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
        // And before signed URLs' expiries (NULL: none known, as for every URL claimed before).
        if (try? connection.statement("SELECT expires_ms FROM list_urls LIMIT 0")) == nil {
            try connection.execute("ALTER TABLE list_urls ADD COLUMN expires_ms INTEGER")
        }
        // The pending items whose URL states an expiry, soonest first: read after the `high` ones
        // and before the rest; a partial index, so a list without any costs nothing.
        try connection.execute("""
            CREATE INDEX IF NOT EXISTS list_urls_expiring ON list_urls(list_id, expires_ms, seq)
            WHERE state = 0 AND high IS NULL AND expires_ms IS NOT NULL
            """)
        // And before mirrors: an item's `mirrors` (their URLs, one a line; NULL: none) and the
        // mirror that served a cached URL (NULL: the URL itself).
        // Each looked for on its own: a stop between the two leaves the second to add next time.
        if (try? connection.statement("SELECT mirrors FROM list_urls LIMIT 0")) == nil {
            try connection.execute("ALTER TABLE list_urls ADD COLUMN mirrors TEXT")
        }
        if (try? connection.statement("SELECT served_by FROM list_urls LIMIT 0")) == nil {
            try connection.execute("ALTER TABLE list_urls ADD COLUMN served_by TEXT")
        }
        // And before sitemaps: what reading a sitemap list found, for its report (NULL: not one).
        if (try? connection.statement("SELECT sitemap FROM lists LIMIT 0")) == nil {
            try connection.execute("ALTER TABLE lists ADD COLUMN sitemap TEXT")
        }
        // And before deadlines: when the list must be warmed by (NULL: no deadline).
        if (try? connection.statement("SELECT ready_by_ms FROM lists LIMIT 0")) == nil {
            try connection.execute("ALTER TABLE lists ADD COLUMN ready_by_ms INTEGER")
        }
        // The high-priority items still pending, read before the rest: a partial index, so a
        // list without any costs nothing.
        try connection.execute("CREATE INDEX IF NOT EXISTS list_urls_high ON list_urls(list_id, seq) WHERE high = 1 AND state = 0")
        self.connection = Locked(connection)
    }
}
