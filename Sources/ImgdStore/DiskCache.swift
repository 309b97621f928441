import ImgdCore
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The disk tier: the cache folder, its index and its lock, as one thing.
///
/// - Opening takes the single-instance lock (`<cache>/lock`), opens the folder (emptying
///   `tmp/`) and the index (`<cache>/index.sqlite`); nothing is scanned.
/// - ``lookup(_:)`` trusts a file only when its index row says so: the size must match on every
///   read, and an entry written before an unclean shutdown has its SHA-256 checked on first use.
///   A bad entry is dropped (row first, then file) and reported as a miss.
/// - ``record(_:)`` is called after a file has been renamed into place, never before.
public final class DiskCache: Sendable {
    /// Files and temp files.
    public let directory: CacheDirectory
    /// One row per entry.
    public let index: CacheIndex
    /// The size cap and what counts against it.
    public let budget: DiskBudget
    /// Every eviction made, by reason, and the observer told of each.
    public let evictions = EvictionLedger()
    /// Where the cache's own upkeep runs, one piece at a time and never on a transfer's or the
    /// cooperative pool's thread: the maintainer and the room maker, two actors on this executor.
    public let housekeeping = QueueExecutor(label: "imgd.cache-housekeeping")
    /// Room under the cap for arriving bodies, and space freed when the filesystem is full. The
    /// room maker keeps no state of its own (the budget and the index are the cache's), and its
    /// isolation is the housekeeping executor's: any instance serves, and a caller keeps one.
    public var room: RoomMaker { RoomMaker(cache: self) }
    let lock: CacheLock
    /// Keys whose file is being published and whose row is not recorded yet, with how many
    /// bodies of each are: the reconcile leaves their files alone (see ``beginPublishing(_:)``).
    let publishing = Locked<[CacheKey: Int]>([:])
    /// Index queries made by ``lookup(_:)`` (one key or several), in all: how tests see that a
    /// request asks the index once.
    package let lookups = Atomic<Int>(0)
    /// Quotas per user (``UserQuotas``), set at start and by each reload, and the owners charged
    /// since the last quota pass (see ``DiskCache/charged(_:)``).
    let quotaState = Locked(QuotaState())

    /// The default size cap: 1 GiB.
    public static let defaultLimit = 1 << 30

    /// Opens the cache at `root`, creating it if needed, capped at `limit` bytes.
    public init(root: String, limit: Int = DiskCache.defaultLimit) throws(DiskCacheError) {
        // The lock first: opening the folder empties its tmp/ (and may move an old layout), which
        // must never happen under an imgd that is using it.
        do {
            try CacheDirectory.makeFolders(root)
        } catch {
            throw .folder(error)
        }
        do {
            lock = try CacheLock(path: root + "/lock")
        } catch {
            throw .locked(error)
        }
        do {
            directory = try CacheDirectory(root: root)
        } catch {
            throw .folder(error)
        }
        do {
            index = try CacheIndex(path: root + "/index.sqlite")
            budget = DiskBudget(limit: limit, stored: try index.totals().bytes)
        } catch {
            throw .index(error)
        }
    }

    /// The cached entry for `key`, checked (see the type's notes), or nil.
    public func lookup(_ key: CacheKey) -> CachedEntry? {
        lookups.add(1, ordering: .relaxed)
        guard let row = try? index.entry(for: key) else { return nil }
        return checked(row)
    }

    /// The cached entries of those `keys` that have one, each checked as by ``lookup(_:)``; the
    /// rows are read in one index transaction (a list's URLs before they are queued).
    public func lookup(_ keys: [CacheKey]) -> [CacheKey: CachedEntry] {
        lookups.add(1, ordering: .relaxed)
        guard let rows = try? index.entries(for: keys) else { return [:] }
        return rows.compactMapValues(checked)
    }

    /// `row`'s entry if its file is in place (and, when due, its content verified); else the
    /// entry is dropped and nil returned.
    private func checked(_ row: IndexEntry) -> CachedEntry? {
        let key = row.key
        let path = directory.path(for: key)
        guard directory.existingSize(of: key) == row.bytes else {
            drop(key)
            return nil
        }
        if row.needsVerification {
            guard verify(row, at: path) else {
                drop(key)
                return nil
            }
            try? index.markVerified(key)
        }
        return CachedEntry(entry: row, path: path)
    }

    /// Records entries whose files are in place, counting them as stored; `reserved` bytes held
    /// for them are given back in the same step, so stored + reserved never counts a file twice
    /// (a reading in between would see the cache over its cap). If the index refuses, nothing
    /// changes: the caller still holds its reservations (and ends its publishes itself).
    ///
    /// `published` keys end their ``beginPublishing(_:)`` once the rows are committed, before any
    /// other index write: an eviction that removes one of these new rows then also unlinks its
    /// file. Ended after the write lock was let go, a row evicted in between had its unlink
    /// skipped as "being published", and its file stayed on disk with no row, uncounted by the
    /// cap until the reconcile found it.
    public func record(
        _ entries: [IndexEntry], releasing reserved: Int = 0, endingPublishing published: [CacheKey] = []
    ) throws(SQLiteError) {
        budget.settle(reserved: reserved, stored: try index.insert(entries, thenWhileLocked: { endPublishing(published) }))
    }

    /// Notes that a body of `key` is about to be given its final name; call before anything is
    /// written under that name, and ``endPublishing(_:)`` once its row is recorded (or the body
    /// failed). Meanwhile no file of that key is unlinked by anything else: the reconcile (an old
    /// file without a row), an eviction or the age sweep (just after removing the key's row), a
    /// lookup that found it bad. Each could otherwise unlink the new file that replaced the old
    /// one in between, and its row, committed after, would name no file.
    public func beginPublishing(_ key: CacheKey) {
        publishing.withLock { $0[key, default: 0] += 1 }
    }

    /// Ends ``beginPublishing(_:)`` for each of `keys` (once per call made).
    public func endPublishing(_ keys: some Sequence<CacheKey>) {
        publishing.withLock { publishing in
            for key in keys {
                guard let count = publishing[key] else { continue }
                publishing[key] = count > 1 ? count - 1 : nil
            }
        }
    }

    /// Removes `key`'s row, then its file.
    public func drop(_ key: CacheKey) {
        do {
            _ = try removeEntries([key])
        } catch {
            removeFile(of: key)
        }
    }

    /// Removes the rows of `keys` and then, before any other index write, their files (see
    /// ``removeFile(of:)``); returns the bytes the rows recorded, no longer counted as stored.
    /// Under the write lock, so that a publish of one of these keys cannot record its new row
    /// and end between the two steps.
    func removeEntries(_ keys: [CacheKey]) throws(SQLiteError) -> Int {
        let bytes = try index.remove(keys, thenWhileLocked: { for key in keys { removeFile(of: key) } })
        budget.removed(bytes)
        return bytes
    }

    /// Unlinks `key`'s file after its row was removed, unless a body of that key is being
    /// published: once the row is gone the key is a miss, and a fetch of it may write a new file
    /// under the name at any moment, whose row follows; unlinking that one would leave its row
    /// naming no file. A file left so is replaced by the publish (or, if that fails, is a file
    /// without a row, which the reconcile removes).
    func removeFile(of key: CacheKey) {
        publishing.withLock { publishing in
            if publishing[key] == nil { unlink(directory.path(for: key)) }
        }
    }

    /// Flushes access times, records a clean shutdown and releases the lock. The cache must not
    /// be used afterwards.
    ///
    /// With `syncing` (the daemon's stop), the files are made durable first
    /// (``CacheDirectory/syncFilesystem()``): a clean shutdown means the next start trusts every
    /// entry without checking its SHA-256, which is only true if a power cut after the stop
    /// cannot lose their data. If the sync fails, the shutdown is left recorded as unclean, and
    /// the next start checks entries before use.
    ///
    /// Without (`imgd prefetch`): nothing waits for the disk — on a warm of 20,000 images the
    /// sync was a third of the run — and the stop is clean for this boot only: until the machine
    /// restarts, the data is in the page cache whether or not it reached the disk; after a
    /// restart (which a power cut before writeback would be) the next start checks entries
    /// before use, as after a crash (``CacheIndex/close(syncedToDisk:)``). Where the boot cannot
    /// be told (no `/proc`), it syncs.
    ///
    /// Two costs of not syncing, stated in README ("Power loss"): a writeback that fails later in
    /// the same boot (an I/O error, a full thin pool) is seen by no later start (`imgd fsck`
    /// finds its damage); and the first start after a restart checks every entry at first use,
    /// not only this run's (the generation that marks entries unchecked covers all rows).
    public func close(syncing: Bool = true) throws(SQLiteError) {
        defer { lock.release() }
        if !syncing, BootIdentity.current != nil {
            try index.close(syncedToDisk: false)
        } else if directory.syncFilesystem() {
            try index.close()
        } else {
            try index.flushAccesses()
        }
    }

    private func verify(_ row: IndexEntry, at path: String) -> Bool {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { return false }
        defer { Glibc.close(fd) }
        return (try? SHA256Digest(fileDescriptor: fd, count: row.bytes)) == row.sha256
    }
}

/// An entry found in the disk tier: its record and its file.
public struct CachedEntry: Sendable, Equatable {
    public let entry: IndexEntry
    /// Absolute path of the file.
    public let path: String

    public init(entry: IndexEntry, path: String) {
        self.entry = entry
        self.path = path
    }
}

/// Why the disk tier could not be opened.
public enum DiskCacheError: Error, Sendable, CustomStringConvertible {
    /// The folder could not be created or opened.
    case folder(StoreError)
    /// Another imgd holds the cache (or the lock file is unusable).
    case locked(CacheLockError)
    /// The index could not be opened (corrupt, unwritable, disk full).
    case index(SQLiteError)

    public var description: String {
        switch self {
        case .folder(let error): "\(error)"
        case .locked(let error): "\(error)"
        case .index(let error): "cannot open the cache index: \(error)"
        }
    }
}
