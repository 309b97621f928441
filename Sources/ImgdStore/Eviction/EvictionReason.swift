/// Why entries left the disk tier: the `reason` of the daemon's `evicted` event.
public enum EvictionReason: String, Sendable, CaseIterable {
    /// To keep the cache under its size cap: room made for a body at admission, or the cache
    /// brought back under a lowered cap.
    case size
    /// The filesystem was full (ENOSPC) before the cap was reached: other files share it.
    case space
    /// Unused for longer than the maximum age.
    case age
    /// Asked for: the `evict` command, and `purge` of the disk tier.
    case command
    /// To bring one user's entries back under that user's quota (quotas per user): only that
    /// user's least recently used, unpinned entries.
    case quota
}
