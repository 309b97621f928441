/// Where memory-pressure events come from, decided once at start by ``resolve(environment:procSelfCgroup:cgroupRoot:procPressureMemory:)``
/// and logged with ``description``.
///
/// In order of preference: what systemd hands over (`MEMORY_PRESSURE_WATCH`), the kernel's
/// pressure stall information (PSI) for the process's own cgroup, then for the whole system.
/// A PSI trigger needs a kernel that accepts it from this process; when it refuses, the
/// monitor falls back to reading `avg10` every few seconds (``psiPolling(path:threshold:interval:)``).
public enum MemoryPressureSource: Sendable, Equatable, CustomStringConvertible {
    /// No events from the system (``MemoryPressureMonitor/trigger()`` still works); `reason`
    /// says why, for the log.
    case disabled(reason: String)
    /// systemd's `MEMORY_PRESSURE_WATCH` protocol: watch `path` as `kind` says, after writing
    /// `write` (the decoded `MEMORY_PRESSURE_WRITE`, possibly empty) to it.
    case systemdWatch(path: String, kind: Kind, write: [UInt8])
    /// A PSI file (a cgroup's `memory.pressure` or `/proc/pressure/memory`) with `trigger`
    /// registered on it; the kernel wakes us when the trigger's stall threshold is crossed.
    case psiTrigger(path: String, trigger: String)
    /// A PSI file read every `interval`; an event each time the `some` line's `avg10` (a
    /// percentage) rises above `threshold`.
    case psiPolling(path: String, threshold: Double, interval: Duration)

    /// The trigger registered on a PSI file: `some 200000 2000000`, an event when tasks stall on
    /// memory for 200 ms within 2 s (systemd's own default). The 2 s window is the shortest the
    /// kernel accepts from a process without CAP_SYS_RESOURCE.
    public static let defaultTrigger = "some 200000 2000000"
    /// The `avg10` percentage above which polling reports pressure: 10.0 by default.
    public static let defaultPollingThreshold = 10.0
    /// How often polling reads the PSI file: every 5 seconds by default.
    public static let defaultPollingInterval = Duration.seconds(5)

    /// One line for the log: "memory pressure: watching /proc/pressure/memory (trigger some 200000 2000000)".
    public var description: String {
        switch self {
        case .disabled(let reason):
            "memory pressure: disabled (\(reason))"
        case .systemdWatch(let path, let kind, let write):
            "memory pressure: watching \(path) (\(kind) from MEMORY_PRESSURE_WATCH"
                + (write.isEmpty ? ")" : ", \(write.count) bytes written)")
        case .psiTrigger(let path, let trigger):
            "memory pressure: watching \(path) (trigger \(trigger))"
        case .psiPolling(let path, let threshold, let interval):
            "memory pressure: reading avg10 of \(path) every \(Self.format(interval)) (pressure above \(threshold)%)"
        }
    }

    /// A short, stable name for `status`: `psi-trigger`, `psi-poll`, `systemd` or `off`.
    public var code: String {
        switch self {
        case .disabled: "off"
        case .systemdWatch: "systemd"
        case .psiTrigger: "psi-trigger"
        case .psiPolling: "psi-poll"
        }
    }

    /// The file or socket watched; nil when disabled.
    public var path: String? {
        switch self {
        case .disabled: nil
        case .systemdWatch(let path, _, _), .psiTrigger(let path, _), .psiPolling(let path, _, _): path
        }
    }

    /// "5s" or "250ms": short, like the durations the configuration accepts.
    private static func format(_ duration: Duration) -> String {
        let (seconds, attoseconds) = duration.components
        if attoseconds == 0 { return "\(seconds)s" }
        return "\(seconds * 1000 + attoseconds / 1_000_000_000_000_000)ms"
    }
}
