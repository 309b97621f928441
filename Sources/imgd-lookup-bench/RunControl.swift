import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// What the client threads are asked to do, set by the main thread and read by each client
/// once per read (not per reply), so it costs the hot loop nothing measurable.
final class RunControl: Sendable {
    enum Phase: Int {
        /// Requests are sent and checked, not counted: connections and the daemon warm up.
        case warmingUp = 0
        /// Replies that arrive now are counted and timed.
        case measuring = 1
        /// Send nothing more; read the replies still owed, then close.
        case stopping = 2
    }

    private let phase = Atomic<Int>(Phase.warmingUp.rawValue)

    var current: Phase { Phase(rawValue: phase.load(ordering: .acquiring)) ?? .stopping }

    func enter(_ next: Phase) { phase.store(next.rawValue, ordering: .releasing) }
}

/// CLOCK_MONOTONIC in nanoseconds (a vDSO call: no syscall, about 20 ns).
func monotonicNanoseconds() -> UInt64 {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
}

/// Sleeps for `seconds`, resuming after a signal interrupts it.
func sleep(seconds: Double) {
    var request = timespec(tv_sec: Int(seconds), tv_nsec: Int((seconds - seconds.rounded(.down)) * 1e9))
    var remaining = timespec()
    while nanosleep(&request, &remaining) == -1, errno == EINTR { request = remaining }
}
