#if canImport(Glibc)
import Glibc
#endif

/// Wall-clock time for what is stored (fetched-at, last-access, pinned-until) and for the age
/// sweep, in milliseconds since 1970-01-01 UTC, immune to clock steps within a run.
///
/// The system clock is read once, at first use; from then on time advances with
/// `CLOCK_BOOTTIME` (monotonic, counts suspend). A step of the system clock (an operator's
/// `date -s`, NTP correcting a bad RTC) therefore cannot make every entry look a week old and
/// sweep the cache, nor stamp new accesses in the past; the run keeps its own steady time and
/// the next run starts from the system clock again. ``drift`` says how far the two have come
/// apart, for a log line.
public enum WallClock {
    private static let steady = SteadyWallClock(
        wallMilliseconds: systemMilliseconds(), monotonicMilliseconds: bootMilliseconds())

    /// Now, on this run's steady clock.
    public static func nowMilliseconds() -> Int {
        steady.now(monotonicMilliseconds: bootMilliseconds())
    }

    /// The system clock's reading minus ``nowMilliseconds()``: 0 unless the clock was stepped
    /// during this run.
    public static var drift: Int { systemMilliseconds() - nowMilliseconds() }

    /// The system clock (`CLOCK_REALTIME`), as it is now.
    public static func systemMilliseconds() -> Int { read(CLOCK_REALTIME) }

    /// Time since boot, including suspend (`CLOCK_BOOTTIME`).
    static func bootMilliseconds() -> Int { read(CLOCK_BOOTTIME) }

    private static func read(_ clock: clockid_t) -> Int {
        var now = timespec()
        clock_gettime(clock, &now)
        return Int(now.tv_sec) * 1000 + Int(now.tv_nsec) / 1_000_000
    }
}

/// Wall-clock time that moves only with a monotonic clock: anchored to one reading of each,
/// it answers `anchor wall + monotonic elapsed`. See ``WallClock``.
public struct SteadyWallClock: Sendable {
    private let wallAnchor: Int
    private let monotonicAnchor: Int

    /// Anchors the clock: the wall clock read `wallMilliseconds` when the monotonic clock read
    /// `monotonicMilliseconds`.
    public init(wallMilliseconds: Int, monotonicMilliseconds: Int) {
        wallAnchor = wallMilliseconds
        monotonicAnchor = monotonicMilliseconds
    }

    /// The wall-clock time when the monotonic clock reads `monotonicMilliseconds`.
    public func now(monotonicMilliseconds: Int) -> Int {
        wallAnchor + (monotonicMilliseconds - monotonicAnchor)
    }
}
