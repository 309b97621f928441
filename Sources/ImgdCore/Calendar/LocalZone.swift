#if canImport(Glibc)
import Glibc
#endif

/// A time zone as the one thing calendar windows need of it: the offset from UTC in force at
/// an instant. Wall time is derived from it, both ways, including across a daylight-saving
/// change (``wallTime(at:)``, ``instant(of:second:)``), so the rules for a skipped or repeated
/// hour are written once and tested with a zone made up for the test.
public protocol LocalZone: Sendable {
    /// Seconds east of UTC at `epochSecond` (seconds since 1970-01-01 UTC).
    func offset(at epochSecond: Int64) -> Int
}

extension LocalZone {
    /// The local date and the second of that day (0 ..< 86,400) at `epochSecond`.
    public func wallTime(at epochSecond: Int64) -> (date: CivilDate, second: Int) {
        let local = epochSecond + Int64(offset(at: epochSecond))
        let days = Int((local >= 0 ? local : local - 86_399) / 86_400)
        return (CivilDate(daysSinceEpoch: days), Int(local - Int64(days) * 86_400))
    }

    /// The instant at which local clocks show `second` seconds into `date` (`second` may be
    /// 86,400: midnight at the end of the day).
    ///
    /// - A wall time that happens twice (clocks go back) is its first occurrence.
    /// - A wall time that never happens (clocks go forward over it) is the instant the clocks
    ///   jump: a window from 02:30 on the night the hour from 02:00 is skipped opens at the
    ///   change (03:00 new time), neither late nor not at all.
    public func instant(of date: CivilDate, second: Int) -> Int64 {
        let wall = Int64(date.daysSinceEpoch) * 86_400 + Int64(second)
        // The offsets in force a day either side cover any one change near this wall time.
        let before = offset(at: wall - 86_400), after = offset(at: wall + 86_400)
        let candidates = Set([before, after]).map { wall - Int64($0) }.filter { offset(at: $0) == Int(wall - $0) }
        if let first = candidates.min() { return first }
        // Skipped: the change lies between the two readings; find its first instant.
        var low = wall - Int64(max(before, after)), high = wall - Int64(min(before, after))
        while low < high {
            let middle = low + (high - low) / 2
            if offset(at: middle) == after { high = middle } else { low = middle + 1 }
        }
        return low
    }
}

/// The system's local time zone (`TZ`, else `/etc/localtime`), through the C library.
public struct SystemLocalZone: LocalZone {
    public init() {
        // Reads TZ again: a daemon started with a new TZ in its environment uses it.
        tzset()
    }

    public func offset(at epochSecond: Int64) -> Int {
        var time = time_t(epochSecond)
        var parts = tm()
        guard localtime_r(&time, &parts) != nil else { return 0 }
        return Int(parts.tm_gmtoff)
    }
}

/// A zone with a fixed offset (UTC: 0), for tests and for `TZ`-less reasoning.
public struct FixedOffsetZone: LocalZone {
    public let seconds: Int

    public init(seconds: Int) { self.seconds = seconds }

    public func offset(at epochSecond: Int64) -> Int { seconds }
}
