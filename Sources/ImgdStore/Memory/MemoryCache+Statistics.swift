extension MemoryCache {
    /// A snapshot of the memory tier's counters and limits, for `imgd status` and metrics.
    /// Counters start at zero when the cache is made and only grow; `bytes` and `entries` are
    /// what is held right now.
    public struct Statistics: Sendable, Equatable {
        /// Lookups that found bytes.
        public var hits: Int
        /// Lookups that found nothing.
        public var misses: Int
        /// Bytes held now.
        public var bytes: Int
        /// Images held now.
        public var entries: Int
        /// Times the cache was emptied by ``MemoryCache/purge()``.
        public var purges: Int
        /// Inserts refused: the object was larger than 1/8 of the byte limit, or the cache was
        /// cooling down after a purge.
        public var rejected: Int
        /// The byte limit.
        public var limitBytes: Int
        /// The entry limit.
        public var limitEntries: Int
        /// True while inserts are refused after a purge.
        public var isCoolingDown: Bool

        /// A snapshot with every field given.
        public init(
            hits: Int, misses: Int, bytes: Int, entries: Int, purges: Int, rejected: Int,
            limitBytes: Int, limitEntries: Int, isCoolingDown: Bool
        ) {
            self.hits = hits
            self.misses = misses
            self.bytes = bytes
            self.entries = entries
            self.purges = purges
            self.rejected = rejected
            self.limitBytes = limitBytes
            self.limitEntries = limitEntries
            self.isCoolingDown = isCoolingDown
        }
    }
}
