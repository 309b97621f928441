import ImgdCore

/// The memory tier: bytes of recently served images, so a hot image is answered without
/// touching the disk.
///
/// Least recently used entries are evicted first, to stay within two limits: bytes (64 MiB by
/// default) and entries (10,000 by default). An object larger than 1/8 of the byte limit is not
/// kept (8 MiB by default), so one large image cannot push out many small ones.
///
/// Under memory pressure the daemon calls ``purge()``: the cache empties and refuses inserts
/// for a cool-down (30 seconds by default), so it does not refill while the system is still
/// short of memory. Lookups, inserts and removals are O(1). Safe to use from any thread.
public final class MemoryCache: Sendable {
    /// Guards all mutable state: the entries and their recency list, the limits, the counters
    /// and the end of the cool-down. Held only for O(1) work (O(n) in ``setLimits(bytes:entries:)``),
    /// and nothing is called under it except the clock.
    private let state: Locked<MemoryCacheState>
    private let now: @Sendable () -> ContinuousClock.Instant

    /// The byte limit unless told otherwise: 64 MiB (the daemon's `memory-limit`).
    public static let defaultLimitBytes = 64 << 20

    /// A cache of at most `limitBytes` bytes (64 MiB by default) in at most `limitEntries`
    /// images (10,000 by default), refusing inserts for `coolDown` after a purge (30 seconds by
    /// default). `now` is the clock the cool-down is measured on; tests pass their own.
    public init(
        limitBytes: Int = defaultLimitBytes,
        limitEntries: Int = 10_000,
        coolDown: Duration = .seconds(30),
        now: @escaping @Sendable () -> ContinuousClock.Instant = { .now }
    ) {
        precondition(limitBytes >= 0 && limitEntries >= 0, "memory cache limits cannot be negative")
        precondition(coolDown >= .zero, "a cool-down cannot be negative")
        state = Locked(MemoryCacheState(limitBytes: limitBytes, limitEntries: limitEntries, coolDown: coolDown))
        self.now = now
    }

    /// The bytes stored for `key`, which becomes the most recently used; nil when absent.
    /// Counts a hit or a miss.
    public func value(for key: CacheKey) -> [UInt8]? {
        image(for: key)?.bytes
    }

    /// The image stored for `key` (bytes and, when known, its disk entry), which becomes the
    /// most recently used; nil when absent. Counts a hit or a miss.
    public func image(for key: CacheKey) -> MemoryImage? {
        state.withLock { $0.image(for: key) }
    }

    /// Stores `bytes` for `key` as the most recently used, replacing what was there, then evicts
    /// the least recently used entries until both limits hold. Refused (and counted in
    /// ``Statistics/rejected``) when `bytes` is larger than 1/8 of the byte limit or the cache
    /// is cooling down after a purge; a refused insert also drops the key's older bytes.
    public func insert(_ bytes: [UInt8], for key: CacheKey) {
        insert(MemoryImage(bytes: bytes, entry: nil), for: key)
    }

    /// Stores `image` for `key`, under the same rules as inserting bare bytes.
    public func insert(_ image: MemoryImage, for key: CacheKey) {
        state.withLock { $0.insert(image, for: key, now: now) }
    }

    /// Whether `key` is held, without counting a hit or a miss and without moving it in the
    /// recency order (`explain` looks; it does not use).
    public func contains(_ key: CacheKey) -> Bool {
        state.withLock { $0.entries.contains(key) }
    }

    /// Forgets `key`, if present (the disk copy was deleted or replaced).
    public func remove(_ key: CacheKey) {
        _ = state.withLock { $0.entries.remove(key) }
    }

    /// Empties the cache, counts a purge, and refuses inserts for the cool-down.
    public func purge() {
        let now = now()
        state.withLock { $0.purge(now: now) }
    }

    /// Changes the limits. Shrinking evicts at once: least recently used entries until both
    /// hold, and any entry now larger than 1/8 of the byte limit.
    public func setLimits(bytes: Int, entries: Int) {
        precondition(bytes >= 0 && entries >= 0, "memory cache limits cannot be negative")
        state.withLock { $0.setLimits(bytes: bytes, entries: entries) }
    }

    /// The counters and limits now.
    public var statistics: Statistics {
        state.withLock { $0.statistics(now: now) }
    }

    /// Keys and sizes from most to least recently used, read by walking the list: lets tests
    /// check the list, its dictionary and the byte count agree.
    func keysByRecency() -> [(key: CacheKey, size: Int)] {
        state.withLock { $0.entries.keysByRecency().map { ($0.key, $0.cost) } }
    }
}

/// An image held in memory: its bytes and, when it came from the disk tier, the entry they
/// were read from (so a memory hit answers path, size and format without the index).
public struct MemoryImage: Sendable, Equatable {
    public let bytes: [UInt8]
    public let entry: CachedEntry?

    public init(bytes: [UInt8], entry: CachedEntry?) {
        self.bytes = bytes
        self.entry = entry
    }
}
