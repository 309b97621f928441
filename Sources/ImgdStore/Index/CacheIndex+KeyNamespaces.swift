import ImgdCore

/// The check made once per cache since chosen keys got a namespace of their own
/// (``CacheKey/init(chosen:owner:)``): rows an earlier imgd wrote under a key that is not their
/// URL's (a chosen key, hashed then like a URL, perhaps spelled as another URL to poison its
/// entry) are found here and removed by the daemon.
extension CacheIndex {
    /// The version of key derivation the rows are known to follow; 2 since chosen keys have a
    /// namespace of their own.
    static let keysVersion = 2

    /// Whether the rows still need the check: written before ``keysVersion`` (or never marked).
    public func keysNeedCheck() throws(SQLiteError) -> Bool {
        try writer.withLock { connection throws(SQLiteError) in (try Self.meta(connection, "keys_version") ?? 0) < Self.keysVersion }
    }

    /// Rows after `rowid` (in rowid order), at most `limit`: each one's rowid, key and stored URL.
    public func keysAndURLs(after rowid: Int, limit: Int) throws(SQLiteError) -> [(rowid: Int, key: CacheKey, url: String)] {
        try reader.withLock { connection throws(SQLiteError) in
            let statement = try connection.statement("SELECT rowid, key, url FROM entries WHERE rowid > ?1 ORDER BY rowid LIMIT ?2")
            defer { statement.reset() }
            statement.bind(1, rowid)
            statement.bind(2, limit)
            var rows: [(rowid: Int, key: CacheKey, url: String)] = []
            while try statement.step() {
                guard let digest = SHA256Digest(bytes: statement.bytes(1)) else { continue }
                rows.append((statement.int(0), CacheKey(digest: digest), statement.string(2) ?? ""))
            }
            return rows
        }
    }

    /// Records that the rows follow ``keysVersion``: the check is not made again.
    public func markKeysChecked() throws(SQLiteError) {
        try writer.withLock { connection throws(SQLiteError) in try Self.setMeta(connection, "keys_version", Self.keysVersion) }
    }
}
