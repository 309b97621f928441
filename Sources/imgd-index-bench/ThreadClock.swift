#if canImport(Glibc)
import Glibc
#endif

/// The calling thread's clocks, read around each lookup to tell where a slow lookup's time went:
/// on the CPU, runnable but waiting for one (another thread or process had it), or blocked (a
/// lock, a disk read). Linux only, and per thread: the run-queue wait is read from
/// `/proc/thread-self/schedstat` as it was when the clock was made, so a clock belongs to the
/// thread that made it (it is not Sendable).
final class ThreadClock {
    /// `/proc/thread-self/schedstat` of the thread that made the clock ("run-ns wait-ns slices"),
    /// or -1, and then run-queue waits read as zero.
    private let schedstat: Int32

    init() {
        schedstat = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC)
    }

    deinit {
        if schedstat >= 0 { close(schedstat) }
    }

    /// Runs `work` and returns what it took. The wall and CPU clocks are read innermost, so the
    /// clock's own reads (two syscalls each side) are not counted as the lookup's time.
    func measure(_ work: () -> Void) -> LookupTime {
        let switches = Self.voluntarySwitches()
        let waited = runQueueWait()
        let cpu = Self.seconds(CLOCK_THREAD_CPUTIME_ID)
        let start = Self.seconds(CLOCK_MONOTONIC)
        work()
        let wall = Self.seconds(CLOCK_MONOTONIC) - start
        return LookupTime(
            wall: wall, cpu: Self.seconds(CLOCK_THREAD_CPUTIME_ID) - cpu, runQueue: runQueueWait() - waited,
            blocked: Self.voluntarySwitches() > switches)
    }

    /// Seconds this thread has been runnable but not running, so far.
    private func runQueueWait() -> Double {
        guard schedstat >= 0 else { return 0 }
        var buffer = (UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0))
        return withUnsafeMutableBytes(of: &buffer) { bytes in
            let count = pread(schedstat, bytes.baseAddress, bytes.count, 0)
            guard count > 0 else { return 0 }
            // The second of three decimal fields.
            var field = 0
            var value: UInt64 = 0
            for byte in bytes.prefix(count) {
                if byte == UInt8(ascii: " ") {
                    field += 1
                    if field == 2 { break }
                } else if field == 1, byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") {
                    value = value * 10 + UInt64(byte - UInt8(ascii: "0"))
                }
            }
            return Double(value) / 1e9
        }
    }

    /// Times this thread gave up the CPU itself (to wait for a lock, a disk read, a sleep).
    private static func voluntarySwitches() -> Int {
        var usage = rusage()
        getrusage(__rusage_who_t(1), &usage)  // RUSAGE_THREAD, not imported without _GNU_SOURCE
        return usage.ru_nvcsw
    }

    private static func seconds(_ clock: clockid_t) -> Double {
        var time = timespec()
        clock_gettime(clock, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }

    /// Bytes the calling thread has had read from storage (page-cache misses), from
    /// `/proc/thread-self/io`; 0 when unavailable.
    static func storageReads() -> Int {
        guard let file = fopen("/proc/thread-self/io", "r") else { return 0 }
        defer { fclose(file) }
        var line = [CChar](repeating: 0, count: 128)
        while fgets(&line, Int32(line.count), file) != nil {
            let text = line.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
            if text.hasPrefix("read_bytes:") { return Int(text.filter(\.isNumber)) ?? 0 }
        }
        return 0
    }
}
