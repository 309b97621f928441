/// How the disk tier is kept within its limits and in good health while imgd runs.
public struct MaintenanceSettings: Sendable, Equatable {
    /// Entries not used for this long are removed (7 days by default).
    public var maxAge: Duration = .seconds(7 * 24 * 3600)
    /// How often the age sweep runs (every 10 minutes by default; also once at start).
    public var sweepInterval: Duration = .seconds(600)
    /// How often batched access times are written to the index (every 2 seconds by default).
    public var accessFlushInterval: Duration = .seconds(2)
    /// How often the folder is checked (still there, writable).
    public var healthInterval: Duration = .seconds(5)
    /// When the cap was crossed by a lower limit, eviction goes down to this fraction of it.
    public var lowWater: Double = 0.9
    /// Rows or files one reconcile slice looks at.
    public var reconcileSlice: Int = 500
    /// Pause between reconcile slices and between eviction passes, so the work never takes a
    /// core for long; the folder walk after a crash costs minutes, not a stall.
    public var pause: Duration = .milliseconds(10)

    public init() {}
}
