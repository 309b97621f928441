import CSQLite

/// One SQLite connection with cached prepared statements (the cache index and the daemon's state
/// database each own theirs).
///
/// Not thread-safe by itself (SQLite is built serialised, but statements are shared state):
/// each connection has one owner, and ``CacheIndex`` keeps each of its two connections behind
/// a mutex.
public final class SQLiteConnection {
    private let handle: OpaquePointer
    private var statements: [String: SQLiteStatement] = [:]
    public let path: String

    /// Process-wide settings, made once before the first connection (SQLite takes them only
    /// before it initialises): no memory statistics. They cost a global mutex around every
    /// allocation and free, shared by all connections: a lookup on the reader's connection
    /// waited on it whenever the eviction pass allocated on the writer's (measured with perf).
    private static let configured = imgd_sqlite3_config_memstatus(0) == SQLITE_OK

    /// Opens (creating if needed) the database at `path`.
    public init(path: String, readOnly: Bool = false) throws(SQLiteError) {
        _ = Self.configured
        var handle: OpaquePointer?
        let flags = (readOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE)
            | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_NOFOLLOW
        let code = sqlite3_open_v2(path, &handle, flags, nil)
        guard code == SQLITE_OK, let handle else {
            let message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            if let handle { sqlite3_close_v2(handle) }
            throw SQLiteError(code: code, message: message, context: "open \(path)")
        }
        self.handle = handle
        self.path = path
        sqlite3_extended_result_codes(handle, 1)
        // A writer holding the lock briefly (a batch of inserts) makes others wait, not fail.
        sqlite3_busy_timeout(handle, 5000)
    }

    deinit {
        statements.removeAll()
        sqlite3_close_v2(handle)
    }

    /// Runs one or more statements that return no rows.
    public func execute(_ sql: String) throws(SQLiteError) {
        var message: UnsafeMutablePointer<CChar>?
        let code = sqlite3_exec(handle, sql, nil, nil, &message)
        guard code == SQLITE_OK else {
            let text = message.map { String(cString: $0) } ?? errorMessage
            sqlite3_free(message)
            throw SQLiteError(code: code, message: text, context: sql)
        }
    }

    /// The prepared statement for `sql`, reset and ready for new bindings (prepared once per
    /// connection, then reused). A caller that stops reading rows before the end must reset it:
    /// a statement left mid-way keeps its read transaction, and so an old snapshot, open.
    public func statement(_ sql: String) throws(SQLiteError) -> SQLiteStatement {
        if let cached = statements[sql] {
            cached.reset()
            return cached
        }
        var raw: OpaquePointer?
        let code = sqlite3_prepare_v3(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &raw, nil)
        guard code == SQLITE_OK, let raw else { throw SQLiteError(code: code, message: errorMessage, context: sql) }
        let statement = SQLiteStatement(raw, connection: self, sql: sql)
        statements[sql] = statement
        return statement
    }

    /// Runs `body` in one transaction (`BEGIN IMMEDIATE`, so a writer never fails half-way for
    /// lack of the write lock), committing on success and rolling back on error.
    public func transaction<T>(_ body: () throws(SQLiteError) -> T) throws(SQLiteError) -> T {
        try execute("BEGIN IMMEDIATE")
        do {
            let result = try body()
            try execute("COMMIT")
            return result
        } catch {
            try? execute("ROLLBACK")
            throw error
        }
    }

    /// Rows changed by the last statement.
    public var changes: Int { Int(sqlite3_changes(handle)) }

    public var errorMessage: String { String(cString: sqlite3_errmsg(handle)) }
}
