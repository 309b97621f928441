#if canImport(Glibc)
import Glibc
#endif

/// Wall-clock time, for what is stored (fetched-at, last-access); timers use a monotonic clock.
public enum WallClock {
    /// Milliseconds since 1970-01-01 UTC.
    public static func nowMilliseconds() -> Int {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return Int(now.tv_sec) * 1000 + Int(now.tv_nsec) / 1_000_000
    }
}
