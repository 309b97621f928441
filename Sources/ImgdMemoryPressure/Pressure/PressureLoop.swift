#if canImport(Glibc)
import Glibc
#endif
import ImgdCore

/// What the monitor's thread runs: waits in `poll` for the watch and the wake signal, reports
/// each event, and returns when woken (cancellation) or throws when the watch fails.
struct PressureLoop: Sendable {
    let watch: PressureWatch
    /// Read end of the ``WakeSignal``: readable means stop.
    let wakeDescriptor: Int32
    /// Reports one event with the watch's origin.
    let emit: @Sendable () -> Void
    /// Called with each `avg10` read while polling (a test seam: lets tests know a reading happened).
    let onReading: @Sendable (Double) -> Void

    func run() throws(MemoryPressureError) {
        switch watch.mode {
        case .disabled:
            preconditionFailure("a disabled source has no loop")
        case .priority(let descriptor):
            try waitForEvents(on: descriptor, events: POLLPRI)
        case .fifo(let descriptor), .socket(let descriptor):
            try waitForEvents(on: descriptor, events: POLLIN)
        case .polling(let threshold, let interval):
            try poll(threshold: threshold, interval: interval)
        }
    }

    private func waitForEvents(on descriptor: Int32, events: Int32) throws(MemoryPressureError) {
        var descriptors = [
            pollfd(fd: wakeDescriptor, events: Int16(POLLIN), revents: 0),
            pollfd(fd: descriptor, events: Int16(events), revents: 0),
        ]
        while true {
            descriptors[0].revents = 0
            descriptors[1].revents = 0
            if retryingOnInterrupt({ Glibc.poll(&descriptors, 2, -1) }) < 0 {
                throw .waitFailed(path: watch.path, errno: errno)
            }
            if descriptors[0].revents != 0 { return }
            let revents = Int32(descriptors[1].revents)
            if revents != 0 { try handle(revents, on: descriptor) }
        }
    }

    private func handle(_ revents: Int32, on descriptor: Int32) throws(MemoryPressureError) {
        switch watch.mode {
        case .priority:
            // A removed cgroup's trigger (or a PSI file without one) reports POLLERR with
            // POLLPRI at once, every time; stop instead of spinning.
            if revents & (POLLERR | POLLHUP | POLLNVAL) != 0 { throw .stoppedReporting(path: watch.path) }
            if revents & POLLPRI != 0 { emit() }
        case .fifo:
            if revents & POLLNVAL != 0 { throw .waitFailed(path: watch.path, errno: EBADF) }
            // Whatever was written since the last wake-up is one event.
            let count = try DescriptorIO.drain(descriptor, path: watch.path).count
            if count > 0 {
                emit()
            } else if revents & (POLLERR | POLLHUP) != 0 {
                // Not expected while we hold a write end too; stop rather than spin on it.
                throw .stoppedReporting(path: watch.path)
            }
        case .socket:
            if revents & POLLNVAL != 0 { throw .waitFailed(path: watch.path, errno: EBADF) }
            let (count, closed) = try DescriptorIO.drain(descriptor, path: watch.path)
            if count > 0 { emit() }
            if closed { throw .connectionClosed(path: watch.path) }
        case .disabled, .polling:
            preconditionFailure("no descriptor to handle in this mode")
        }
    }

    /// Reads `avg10` now and then every `interval` (on a fixed schedule, so slow reads do not
    /// drift it), sleeping in `poll` on the wake signal so cancellation is immediate.
    private func poll(threshold: Double, interval: Duration) throws(MemoryPressureError) {
        var crossing = ThresholdCrossing(threshold: threshold)
        let clock = ContinuousClock()
        var nextRead = clock.now
        var wake = pollfd(fd: wakeDescriptor, events: Int16(POLLIN), revents: 0)
        while true {
            let now = clock.now
            if now >= nextRead {
                if let reading = try PSIAverage.read(watch.path) {
                    onReading(reading)
                    if crossing.update(reading) { emit() }
                }
                nextRead += interval
                if nextRead <= now { nextRead = now + interval }  // after a stall, no burst of reads
            }
            wake.revents = 0
            let ready = Glibc.poll(&wake, 1, Self.milliseconds(until: nextRead, on: clock))
            if ready < 0, errno != EINTR { throw .waitFailed(path: watch.path, errno: errno) }
            if ready > 0 { return }
        }
    }

    /// A `poll` timeout reaching `deadline`: rounded up, so the loop does not wake a little early
    /// and spin until the deadline.
    private static func milliseconds(until deadline: ContinuousClock.Instant, on clock: ContinuousClock) -> Int32 {
        let remaining = clock.now.duration(to: deadline)
        guard remaining > .zero else { return 0 }
        let (seconds, attoseconds) = remaining.components
        let milliseconds = seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
        return Int32(clamping: milliseconds)
    }
}
