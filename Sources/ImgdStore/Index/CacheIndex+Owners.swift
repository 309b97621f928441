import ImgdCore

/// What one uid's entries hold: the figures quotas per user are judged by.
public struct OwnerUsage: Sendable, Equatable {
    public var owner: UInt32
    public var entries: Int
    /// Bytes of every entry charged to it, pinned ones included.
    public var bytes: Int
    /// Bytes of its entries pinned now (counted in ``bytes``; never evicted by its quota).
    public var pinnedBytes: Int

    public init(owner: UInt32, entries: Int = 0, bytes: Int = 0, pinnedBytes: Int = 0) {
        self.owner = owner
        self.entries = entries
        self.bytes = bytes
        self.pinnedBytes = pinnedBytes
    }
}

extension CacheIndex {
    /// Every owner's entries, bytes and pinned bytes at `now`, read in one snapshot: the totals
    /// from `owner_totals` (kept by triggers, one row per owner), the pinned bytes summed over
    /// the pinned rows only (their partial index), as ``pinnedBytes(now:)`` is. Unowned rows are
    /// in neither. In owner order.
    public func ownerUsage(now: Int) throws(SQLiteError) -> [OwnerUsage] {
        try reader.withLock { connection throws(SQLiteError) in
            try connection.execute("BEGIN")
            defer { try? connection.execute("COMMIT") }
            var found: [UInt32: OwnerUsage] = [:]
            let totals = try connection.statement("SELECT owner, entries, bytes FROM owner_totals")
            defer { totals.reset() }
            while try totals.step() {
                guard let owner = UInt32(exactly: totals.int(0)) else { continue }
                found[owner] = OwnerUsage(owner: owner, entries: totals.int(1), bytes: totals.int(2))
            }
            let pinned = try connection.statement(
                "SELECT owner, sum(bytes) FROM entries WHERE pinned_until > ?1 AND owner IS NOT NULL GROUP BY owner")
            defer { pinned.reset() }
            pinned.bind(1, now)
            while try pinned.step() {
                guard let owner = UInt32(exactly: pinned.int(0)) else { continue }
                found[owner, default: OwnerUsage(owner: owner)].pinnedBytes = pinned.int(1)
            }
            return found.values.sorted { $0.owner < $1.owner }
        }
    }

    /// One owner's figures at `now` (zeros when it has no entry), on the writer's connection:
    /// quota enforcement is write-side work, as eviction is.
    public func usage(of owner: UInt32, now: Int) throws(SQLiteError) -> OwnerUsage {
        try writer.withLock { connection throws(SQLiteError) in
            var usage = OwnerUsage(owner: owner)
            let totals = try connection.statement("SELECT entries, bytes FROM owner_totals WHERE owner = ?1")
            defer { totals.reset() }
            totals.bind(1, Int(owner))
            if try totals.step() {
                usage.entries = totals.int(0)
                usage.bytes = totals.int(1)
            }
            usage.pinnedBytes = try Self.pinnedBytes(of: owner, now: now, on: connection)
            return usage
        }
    }

    /// Bytes of `owner`'s entries pinned at `now`, on the reader's connection: what the
    /// publisher's quota check subtracts from the owner's limit.
    public func pinnedBytes(of owner: UInt32, now: Int) throws(SQLiteError) -> Int {
        try reader.withLock { connection throws(SQLiteError) in try Self.pinnedBytes(of: owner, now: now, on: connection) }
    }

    private static func pinnedBytes(of owner: UInt32, now: Int, on connection: SQLiteConnection) throws(SQLiteError) -> Int {
        let statement = try connection.statement(
            "SELECT coalesce(sum(bytes), 0) FROM entries WHERE pinned_until > ?1 AND owner = ?2")
        defer { statement.reset() }
        statement.bind(1, now)
        statement.bind(2, Int(owner))
        return try statement.step() ? statement.int(0) : 0
    }

    /// Up to `limit` of `owner`'s entries not pinned at `now`, least recently used first (the
    /// owner index: no scan of other owners' rows).
    public func evictionCandidates(
        owner: UInt32, now: Int, limit: Int
    ) throws(SQLiteError) -> [(key: CacheKey, bytes: Int)] {
        try writer.withLock { connection throws(SQLiteError) in
            let statement = try connection.statement("""
                SELECT key, bytes FROM entries INDEXED BY entries_by_owner
                WHERE owner = ?1 AND (pinned_until IS NULL OR pinned_until <= ?2)
                ORDER BY last_access LIMIT ?3
                """)
            defer { statement.reset() }
            statement.bind(1, Int(owner))
            statement.bind(2, now)
            statement.bind(3, limit)
            var found: [(key: CacheKey, bytes: Int)] = []
            while try statement.step() {
                if let digest = SHA256Digest(bytes: statement.bytes(0)) {
                    found.append((CacheKey(digest: digest), statement.int(1)))
                }
            }
            return found
        }
    }
}
