import Dispatch

/// Caps the chunks waiting on the spill lanes, all bodies together: the loop waits in
/// ``enter()`` when ``limit`` are queued, until a lane has written one. Nothing a lane does waits
/// for the loop, so the wait always ends.
final class SpillGate: Sendable {
    /// Chunks (of up to 64 KiB each) that may wait: 4 MiB.
    static let limit = 64

    private let slots = DispatchSemaphore(value: SpillGate.limit)

    func enter() { slots.wait() }
    func leave() { slots.signal() }
}
