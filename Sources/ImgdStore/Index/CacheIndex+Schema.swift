/// The index's schema, the migrations of indexes made by earlier versions, and the start of a
/// run (the clean flag and the generation), applied by the writer's connection at every open.
extension CacheIndex {
    /// The entries table. A rowid table, with the key in a unique index beside it: rows are
    /// appended in the order they arrive, and a batch of random keys touches only the small
    /// index's pages. Keyed by the key itself (`WITHOUT ROWID`, as indexes made before
    /// 2026-11-24 are), each new row landed on a random page of the big table, so a transaction
    /// wrote about one 4 KiB page of WAL per row plus its splits (see
    /// ``migrateToRowidTable(_:)``).
    private static let entriesTable = """
        CREATE TABLE IF NOT EXISTS entries (
            key BLOB UNIQUE NOT NULL,
            url TEXT NOT NULL,
            bytes INTEGER NOT NULL,
            sha256 BLOB NOT NULL,
            format TEXT NOT NULL,
            width INTEGER,
            height INTEGER,
            etag TEXT,
            last_modified TEXT,
            content_type TEXT,
            fetched_at INTEGER NOT NULL,
            last_access INTEGER NOT NULL,
            hit_count INTEGER NOT NULL DEFAULT 0,
            pinned_until INTEGER,
            verified_generation INTEGER NOT NULL,
            validated_at INTEGER,
            fresh_until INTEGER,
            cache_flags INTEGER NOT NULL DEFAULT 0,
            owner INTEGER
        );
        """

    private static let schema = entriesTable + """
        CREATE INDEX IF NOT EXISTS entries_by_last_access ON entries(last_access);
        -- Pinned bytes (in every status) are summed over the pinned rows only, not the table.
        CREATE INDEX IF NOT EXISTS entries_pinned ON entries(pinned_until) WHERE pinned_until IS NOT NULL;
        CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY NOT NULL, value INTEGER NOT NULL) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS totals (
            id INTEGER PRIMARY KEY CHECK (id = 0), entries INTEGER NOT NULL, bytes INTEGER NOT NULL);
        INSERT OR IGNORE INTO totals VALUES (0, 0, 0);
        CREATE TRIGGER IF NOT EXISTS entries_counted_in AFTER INSERT ON entries BEGIN
            UPDATE totals SET entries = entries + 1, bytes = bytes + NEW.bytes WHERE id = 0; END;
        CREATE TRIGGER IF NOT EXISTS entries_counted_out AFTER DELETE ON entries BEGIN
            UPDATE totals SET entries = entries - 1, bytes = bytes - OLD.bytes WHERE id = 0; END;
        CREATE TRIGGER IF NOT EXISTS entries_recounted AFTER UPDATE OF bytes ON entries BEGIN
            UPDATE totals SET bytes = bytes - OLD.bytes + NEW.bytes WHERE id = 0; END;
        """ + ownerSchema

    /// Quotas per user: who each entry is charged to (``IndexEntry/owner``), each owner's
    /// entries and bytes kept by triggers (`owner_totals`, no scan), and an index on
    /// (owner, last access) for the owner's least recently used entries. Unowned rows (NULL: rows
    /// from before owners were kept, imgd's own ready lists, the HTTP face's TCP clients) are in
    /// neither. A row keeps its owner when it is replaced (a refresh): only a new row takes one.
    private static let ownerSchema = """
        CREATE INDEX IF NOT EXISTS entries_by_owner ON entries(owner, last_access) WHERE owner IS NOT NULL;
        CREATE TABLE IF NOT EXISTS owner_totals (
            owner INTEGER PRIMARY KEY NOT NULL, entries INTEGER NOT NULL, bytes INTEGER NOT NULL);
        CREATE TRIGGER IF NOT EXISTS entries_owner_in AFTER INSERT ON entries WHEN NEW.owner IS NOT NULL BEGIN
            INSERT INTO owner_totals (owner, entries, bytes) SELECT NEW.owner, 1, NEW.bytes WHERE true
                ON CONFLICT (owner) DO UPDATE SET entries = entries + 1, bytes = bytes + excluded.bytes; END;
        CREATE TRIGGER IF NOT EXISTS entries_owner_out AFTER DELETE ON entries WHEN OLD.owner IS NOT NULL BEGIN
            UPDATE owner_totals SET entries = entries - 1, bytes = bytes - OLD.bytes WHERE owner = OLD.owner;
            DELETE FROM owner_totals WHERE owner = OLD.owner AND entries <= 0; END;
        CREATE TRIGGER IF NOT EXISTS entries_owner_recounted AFTER UPDATE OF bytes, owner ON entries
            WHEN OLD.owner IS NOT NULL OR NEW.owner IS NOT NULL BEGIN
            UPDATE owner_totals SET entries = entries - 1, bytes = bytes - OLD.bytes WHERE owner = OLD.owner;
            DELETE FROM owner_totals WHERE owner = OLD.owner AND entries <= 0;
            INSERT INTO owner_totals (owner, entries, bytes) SELECT NEW.owner, 1, NEW.bytes WHERE NEW.owner IS NOT NULL
                ON CONFLICT (owner) DO UPDATE SET entries = entries + 1, bytes = bytes + excluded.bytes; END;
        """

    /// Opens the writer's connection, creating the schema, and starts a run: reads and bumps the
    /// generation after an unclean shutdown, then marks the index in use. With `carrying`, the
    /// file is a fresh one replacing a lost index, and takes that generation.
    static func open(_ path: String, carrying: Int?) throws(SQLiteError)
        -> (writer: SQLiteConnection, clean: Bool, generation: Int, unsyncedBeforeRestart: Bool)
    {
        let writer = try SQLiteConnection(path: path)
        // WAL with synchronous NORMAL: commits never fsync (a lost row just means a refetch; a
        // row never points at a missing or partial file, see the type's notes), only
        // checkpoints do. The default checkpoint every 1,000 pages put an fsync in the middle of
        // warming every few thousand images; every 16,384 pages (64 MiB of WAL) amortises it.
        try writer.execute("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA wal_autocheckpoint = 16384;")
        try addFreshnessColumns(writer)
        try addOwnerColumn(writer)
        try migrateToRowidTable(writer)
        try writer.execute(Self.schema)
        let (clean, generation, unsyncedBeforeRestart): (Bool, Int, Bool) = try writer.transaction { () throws(SQLiteError) in
            var clean = try Self.meta(writer, "clean") ?? 1
            // A stop that did not sync vouches for its files until the machine restarts.
            var unsyncedBeforeRestart = false
            if clean != 0, let boot = try Self.meta(writer, Self.unsyncedBootKey), boot != BootIdentity.current {
                clean = 0
                unsyncedBeforeRestart = true
            }
            var generation = try Self.meta(writer, "generation") ?? 1
            if clean == 0 { generation += 1 }
            if let carrying { generation = max(generation, carrying) }
            try Self.setMeta(writer, "generation", generation)
            try Self.setMeta(writer, "clean", 0)
            return (clean != 0, generation, unsyncedBeforeRestart)
        }
        return (writer, clean, generation, unsyncedBeforeRestart)
    }

    /// Rebuilds an entries table made `WITHOUT ROWID` (imgd before the rowid table) as a rowid
    /// table, rows and totals kept, in one transaction: a crash midway leaves the old table as it
    /// was. Once per index: about 5 s for 1,000,000 rows on this project's 2-core test machine
    /// (copied in key order, so both the table and its key index are appended to); the file
    /// keeps the old table's pages as free pages, which new rows reuse. Indexes
    /// and triggers are dropped first and made again by ``schema`` after the copy, so the copy
    /// neither counts the rows into `totals` twice nor updates indexes row by row.
    private static func migrateToRowidTable(_ connection: SQLiteConnection) throws(SQLiteError) {
        let statement = try connection.statement("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'entries'")
        let sql = try statement.step() ? statement.string(0) ?? "" : ""
        statement.reset()
        guard sql.uppercased().contains("WITHOUT ROWID") else { return }
        try connection.transaction { () throws(SQLiteError) in
            try connection.execute("""
                DROP TRIGGER IF EXISTS entries_counted_in;
                DROP TRIGGER IF EXISTS entries_counted_out;
                DROP TRIGGER IF EXISTS entries_recounted;
                DROP TRIGGER IF EXISTS entries_owner_in;
                DROP TRIGGER IF EXISTS entries_owner_out;
                DROP TRIGGER IF EXISTS entries_owner_recounted;
                DROP INDEX IF EXISTS entries_by_owner;
                DROP INDEX IF EXISTS entries_by_last_access;
                DROP INDEX IF EXISTS entries_pinned;
                ALTER TABLE entries RENAME TO entries_without_rowid;
                """)
            try connection.execute(entriesTable)
            try connection.execute("""
                INSERT INTO entries (\(columns)) SELECT \(columns) FROM entries_without_rowid ORDER BY key;
                DROP TABLE entries_without_rowid;
                """)
            try connection.execute(schema)
        }
    }

    /// Gives an entries table made before freshness was kept its three columns (NULL validated-at:
    /// validated when fetched; no lifetime; no flags). Before ``migrateToRowidTable(_:)``, whose
    /// copy names every column. Adding columns rewrites no row: instant at any size.
    private static func addFreshnessColumns(_ connection: SQLiteConnection) throws(SQLiteError) {
        let statement = try connection.statement("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'entries'")
        let sql = try statement.step() ? statement.string(0) ?? "" : ""
        statement.reset()
        guard !sql.isEmpty, !sql.contains("validated_at") else { return }
        try connection.transaction { () throws(SQLiteError) in
            try connection.execute("""
                ALTER TABLE entries ADD COLUMN validated_at INTEGER;
                ALTER TABLE entries ADD COLUMN fresh_until INTEGER;
                ALTER TABLE entries ADD COLUMN cache_flags INTEGER NOT NULL DEFAULT 0;
                """)
        }
    }

    /// Gives an entries table made before quotas its owner column (NULL for every row: unowned,
    /// charged to nobody). After ``addFreshnessColumns(_:)`` and before
    /// ``migrateToRowidTable(_:)``, whose copy names every column. Instant at any size; the
    /// owner index and `owner_totals` (empty: no row has an owner yet) come with ``schema``.
    private static func addOwnerColumn(_ connection: SQLiteConnection) throws(SQLiteError) {
        let statement = try connection.statement("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'entries'")
        let sql = try statement.step() ? statement.string(0) ?? "" : ""
        statement.reset()
        guard !sql.isEmpty, !sql.contains("owner") else { return }
        try connection.execute("ALTER TABLE entries ADD COLUMN owner INTEGER")
    }
}
