import ImgdCore
import ImgdNetwork
import ImgdStore
import Logging

extension DaemonServices {
    /// Once per cache (``CacheIndex/keysNeedCheck()``), before anything is served: removes every
    /// entry whose key is not its URL's under the key policy. An earlier imgd hashed a chosen key
    /// like a URL, so its rows under chosen keys are unreachable now (chosen keys have a
    /// namespace of their own), and a member could have stored their bytes under another URL's
    /// key, pinned even: such a row would go on being served as that URL's. Both kinds are
    /// removed, pinned or not, and fetched again when asked for. Reads the index in pages; a
    /// million rows cost a few seconds, once.
    static func removeEntriesUnderForeignKeys(disk: DiskCache, downloader: Downloader, logger: Logger) throws(SQLiteError) {
        guard try disk.index.keysNeedCheck() else { return }
        var foreign: [CacheKey] = []
        var after = 0
        while case let page = try disk.index.keysAndURLs(after: after, limit: 10_000), let last = page.last {
            for row in page {
                guard let url = try? ImageURL(row.url), downloader.cacheKey(for: url) == row.key else {
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
            let pass = try disk.evict(chunk)
            removed.files += pass.files
            removed.bytes += pass.bytes
        }
        try disk.index.markKeysChecked()
        if removed.files > 0 {
            logger.notice(
                "removed \(removed.files) cache entries (\(removed.bytes) bytes) an earlier version stored under keys that are not their URL's: chosen keys now have a namespace of their own per user; they are fetched again when asked for")
        }
    }
}
