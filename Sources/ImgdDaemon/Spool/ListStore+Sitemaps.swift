import ImgdStore

/// A sitemap list's summary (what kind, children read and failed, page locations skipped): one
/// JSON object kept with the list, written by its claim and copied into its report.
extension ListStore {
    /// Keeps `summary` (a JSON object) as the list's sitemap summary.
    public func setSitemapSummary(list: Int, _ summary: String) throws(SQLiteError) {
        try connection.withLock { connection throws(SQLiteError) in
            let statement = try connection.statement("UPDATE lists SET sitemap = ?2 WHERE id = ?1")
            defer { statement.reset() }
            statement.bind(1, list)
            statement.bind(2, summary)
            try statement.step()
        }
    }

    /// The list's sitemap summary, or nil for a list that is not a sitemap.
    public func sitemapSummary(list: Int) throws(SQLiteError) -> String? {
        try connection.withLock { connection throws(SQLiteError) in
            let statement = try connection.statement("SELECT sitemap FROM lists WHERE id = ?1")
            defer { statement.reset() }
            statement.bind(1, list)
            guard try statement.step() else { return nil }
            return statement.string(0)
        }
    }
}
