/// One report of memory pressure, passed to the monitor's `onPressure` callback.
public struct MemoryPressureEvent: Sendable, Equatable {
    /// What reported it: `"psi"` (a PSI trigger we registered), `"systemd"` (the
    /// `MEMORY_PRESSURE_WATCH` path), `"avg10"` (polling saw `avg10` rise above the threshold)
    /// or `"command"` (``MemoryPressureMonitor/trigger()``).
    public let origin: String
    /// The monitor's event count including this one: 1 for the first.
    public let count: Int

    /// An event from `origin`, the `count`th of its monitor.
    public init(origin: String, count: Int) {
        self.origin = origin
        self.count = count
    }
}
