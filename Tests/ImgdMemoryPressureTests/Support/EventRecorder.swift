import ImgdCore
import ImgdMemoryPressure

/// Collects a monitor's events with the time each arrived.
final class EventRecorder: Sendable {
    private let events = Locked<[(event: MemoryPressureEvent, at: ContinuousClock.Instant)]>([])

    /// The callback to pass as `onPressure`.
    var callback: @Sendable (MemoryPressureEvent) -> Void {
        { [self] event in
            let now = ContinuousClock.now
            events.withLock { $0.append((event, now)) }
        }
    }

    var count: Int { events.withLock { $0.count } }
    var recorded: [MemoryPressureEvent] { events.withLock { $0.map(\.event) } }
    var arrivals: [ContinuousClock.Instant] { events.withLock { $0.map(\.at) } }
}
