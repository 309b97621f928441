import ImgdCore
import ImgdStore

extension Downloader {
    /// Once per cache (``CacheIndex/keysNeedCheck()``), before anything is served: removes every
    /// entry whose key is not its URL's under the key policy, and returns what went. An earlier
    /// imgd hashed a chosen key like a URL, so its rows under chosen keys are unreachable now
    /// (chosen keys have a namespace of their own per user), and a member could have stored
    /// their bytes under another URL's key, pinned even: such a row would go on being served as
    /// that URL's. Both kinds are removed, pinned or not, and fetched again when asked for.
    /// Reads the index in pages; a million rows cost a few seconds, once.
    public func removeEntriesUnderForeignKeys() throws(SQLiteError) -> EvictionPass {
        guard try cache.index.keysNeedCheck() else { return EvictionPass() }
        var foreign: [CacheKey] = []
        var after = 0
        while case let page = try cache.index.keysAndURLs(after: after, limit: 10_000), let last = page.last {
            for row in page {
                guard let url = try? ImageURL(row.url), cacheKey(for: url) == row.key else {
                    foreign.append(row.key)
                    continue
                }
            }
            after = last.rowid
        }
        var removed = EvictionPass()
        var start = foreign.startIndex
        while start < foreign.endIndex {
            let chunk = Array(foreign[start..<min(start + 1_000, foreign.endIndex)])
            start += chunk.count
            let pass = try cache.evict(chunk)
            removed.files += pass.files
            removed.bytes += pass.bytes
        }
        try cache.index.markKeysChecked()
        return removed
    }

    /// The line to log for what ``removeEntriesUnderForeignKeys()`` removed (nil: nothing).
    public static func foreignKeysMessage(_ removed: EvictionPass) -> String? {
        guard removed.files > 0 else { return nil }
        return "removed \(removed.files) cache entries (\(removed.bytes) bytes) an earlier version stored under keys that are not their URL's: "
            + "chosen keys now have a namespace of their own per user; they are fetched again when asked for"
    }
}
