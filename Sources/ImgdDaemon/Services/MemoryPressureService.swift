import ImgdCore
import ImgdStore
import ImgdMemoryPressure
import Logging

/// Answers memory pressure: each event, from the system or from the `purge` command, empties
/// the memory tier (which then refuses new images for its cool-down), gives freed heap back to
/// the system with `malloc_trim(0)`, and is logged once and counted.
public final class MemoryPressureService: Sendable {
    /// The watcher of the pressure source (its ``MemoryPressureMonitor/eventCount`` counts events
    /// as they arrive; ``eventsHandled`` counts them once answered).
    public let monitor: MemoryPressureMonitor

    private let logger: Logger
    private let handled = Locked(0)

    /// Events answered so far, from every origin: what `status` and `stats` report as
    /// `pressure_events`. An event is counted after its purge and before it is logged or passed
    /// to `onEvent`, so whoever sees it counted sees the memory tier purged, and whoever sees its
    /// log line or its published event sees it counted.
    public var eventsHandled: Int { handled.withLock { $0 } }

    /// Watches `source` and purges `memory` on each event; `onEvent` is told after the purge
    /// (the daemon passes events on to subscribers), `logger` gets one notice per event and, at
    /// start, the source in use. When the kernel refuses a PSI trigger, `avg10` above
    /// `pollingThreshold` percent (10.0 by default) is pressure.
    public init(
        source: MemoryPressureSource, memory: MemoryCache,
        pollingThreshold: Double = MemoryPressureSource.defaultPollingThreshold,
        logger: Logger = Logger(label: "imgd", factory: { _ in SwiftLogNoOpLogHandler() }),
        onEvent: @escaping @Sendable (MemoryPressureEvent, _ purgedBytes: Int) -> Void = { _, _ in }
    ) {
        self.logger = logger
        let handled = handled
        monitor = MemoryPressureMonitor(source: source, pollingThreshold: pollingThreshold) { event in
            let held = memory.statistics.bytes
            memory.purge()
            MallocTrim.releaseFreeMemory()
            handled.withLock { $0 += 1 }
            logger.notice("memory pressure (\(event.origin), event \(event.count)): purged the memory tier (\(held) bytes)")
            onEvent(event, held)
        }
    }

    /// Watches until the calling task is cancelled, logging the source in use once it is open
    /// (after any fallback: the line says what is really watched). A source that fails (a socket
    /// closed by its other end, a PSI file flagged by the kernel) ends the watch with an error;
    /// the `purge` command still works.
    public func run() async throws(MemoryPressureError) {
        let logger = logger
        try await monitor.run { logger.notice("\($0)") }
    }

    /// Reports an event from the `purge` command.
    public func purge() {
        monitor.trigger()
    }
}
