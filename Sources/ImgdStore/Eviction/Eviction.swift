/// One eviction: the entries one pass removed, and why. What ``EvictionLedger`` counts and
/// tells its observer.
public struct Eviction: Sendable, Equatable {
    public var reason: EvictionReason
    /// Entries removed (rows and their files).
    public var files: Int
    /// Their bytes.
    public var bytes: Int

    public init(reason: EvictionReason, files: Int, bytes: Int) {
        self.reason = reason
        self.files = files
        self.bytes = bytes
    }
}
