import ImgdCore
import Testing

/// Calendar windows as pure arithmetic: days and hours parsed, the window in force and the next
/// change at an instant, across midnight and across daylight-saving changes (a zone made up for
/// the test, with a skipped and a repeated hour).
@Suite("Calendar windows: days, hours, the window in force, DST")
struct CalendarWindowTests {
    /// A zone at UTC+1 that moves to UTC+2 at 2026-03-29 01:00 UTC (02:00 local becomes 03:00)
    /// and back at 2026-10-25 01:00 UTC (03:00 local becomes 02:00), as central Europe does.
    struct CentralEuropeLike: LocalZone {
        static let springForward: Int64 = 1_774_746_000  // 2026-03-29T01:00:00Z
        static let fallBack: Int64 = 1_792_890_000  // 2026-10-25T01:00:00Z
        func offset(at epochSecond: Int64) -> Int {
            epochSecond >= Self.springForward && epochSecond < Self.fallBack ? 7200 : 3600
        }
    }

    static func utc(_ year: Int, _ month: Int, _ day: Int, _ hour: Int, _ minute: Int = 0, _ second: Int = 0) -> Int64 {
        Int64(CivilDate(year: year, month: month, day: day).daysSinceEpoch) * 86_400 + Int64(hour * 3600 + minute * 60 + second)
    }

    static func window(_ name: String, days: String = "*", hours: String) throws -> CalendarWindow {
        CalendarWindow(name: name, days: try WeekdaySet(parsing: days), hours: try DailyHours(parsing: hours))
    }

    @Test("civil dates round-trip through days since 1970, and weekdays are right")
    func civilDates() {
        for days in [-800_000, -1, 0, 1, 59, 60, 365, 10_957, 20_000, 20_793, 2_932_896] {
            #expect(CivilDate(daysSinceEpoch: days).daysSinceEpoch == days)
        }
        #expect(CivilDate(daysSinceEpoch: 0) == CivilDate(year: 1970, month: 1, day: 1))
        #expect(CivilDate(year: 2024, month: 2, day: 29).adding(days: 1) == CivilDate(year: 2024, month: 3, day: 1))
        #expect(CivilDate(year: 1970, month: 1, day: 1).weekday == 3)  // Thursday
        #expect(CivilDate(year: 2026, month: 12, day: 6).weekday == 6)  // Sunday
        #expect(CivilDate(year: 2026, month: 12, day: 7).weekday == 0)  // Monday
    }

    @Test("days: *, ranges, lists, wrapping ranges, any case; anything else is refused naming it")
    func days() throws {
        #expect(try WeekdaySet(parsing: "*") == .everyDay)
        #expect(try WeekdaySet(parsing: "mon-fri").description == "mon,tue,wed,thu,fri")
        #expect(try WeekdaySet(parsing: "Sat, SUN").description == "sat,sun")
        #expect(try WeekdaySet(parsing: "fri-mon").description == "mon,fri,sat,sun")
        #expect(try WeekdaySet(parsing: "mon,wed-thu").description == "mon,wed,thu")
        for bad in ["", "monday", "mon-", "mon--fri", "mon,,tue", "1-5", "mon-fri-sat"] {
            #expect(throws: CalendarWindowError.days(bad)) { try WeekdaySet(parsing: bad) }
        }
    }

    @Test("hours: HH:MM or HH:MM:SS, crossing midnight, 24:00 as an end; empty and malformed spans refused")
    func hours() throws {
        let night = try DailyHours(parsing: "22:00-06:00")
        #expect(night.start == 79_200 && night.end == 21_600 && night.crossesMidnight && night.length == 8 * 3600)
        let day = try DailyHours(parsing: "09:30:15-17:00")
        #expect(day.start == 34_215 && day.end == 61_200 && !day.crossesMidnight)
        #expect(try DailyHours(parsing: "00:00-24:00").length == 86_400)
        #expect(throws: CalendarWindowError.emptyHours("10:00-10:00")) { try DailyHours(parsing: "10:00-10:00") }
        #expect(throws: CalendarWindowError.emptyHours("00:00-00:00")) { try DailyHours(parsing: "00:00-00:00") }
        // 00:00 as an end is the end of the day.
        let evening = try DailyHours(parsing: "22:00-00:00")
        #expect(evening.end == 86_400 && !evening.crossesMidnight && evening.length == 7200)
        for bad in ["22-06", "24:00-01:00", "10:60-11:00", "9:00-10:00", "10:00", "10:00-11:00-12:00", "aa:bb-cc:dd", "10:00:60-11:00"] {
            #expect(throws: CalendarWindowError.hours(bad)) { try DailyHours(parsing: bad) }
        }
    }

    @Test("the window in force and the next change, with a window crossing midnight")
    func position() throws {
        let schedule = try WindowSchedule([
            try Self.window("night", days: "mon-fri", hours: "22:00-06:00"),
            try Self.window("lunch", days: "*", hours: "12:00-13:00"),
        ])
        let utc = FixedOffsetZone(seconds: 0)
        // Friday 2026-12-11 23:00: night (opened Friday 22:00) until Saturday 06:00.
        let friday = schedule.position(at: Self.utc(2026, 12, 11, 23), in: utc)
        #expect(friday.current?.window.name == "night")
        #expect(friday.current?.opens == Self.utc(2026, 12, 11, 22) && friday.current?.closes == Self.utc(2026, 12, 12, 6))
        #expect(friday.next?.window.name == "lunch" && friday.next?.opens == Self.utc(2026, 12, 12, 12))
        #expect(friday.changesAt == Self.utc(2026, 12, 12, 6))
        // Saturday 23:00: no night window on the weekend; next is Sunday's lunch.
        let saturday = schedule.position(at: Self.utc(2026, 12, 12, 23), in: utc)
        #expect(saturday.current == nil && saturday.next?.window.name == "lunch" && saturday.changesAt == Self.utc(2026, 12, 13, 12))
        // Sunday 23:00: Sunday is not mon-fri, so no night; next is Monday's lunch, then Monday 22:00.
        let sunday = schedule.position(at: Self.utc(2026, 12, 13, 23), in: utc)
        #expect(sunday.current == nil && sunday.next?.opens == Self.utc(2026, 12, 14, 12))
        // The opening instant is in, the closing one out.
        #expect(schedule.position(at: Self.utc(2026, 12, 14, 12), in: utc).current?.window.name == "lunch")
        #expect(schedule.position(at: Self.utc(2026, 12, 14, 13), in: utc).current == nil)
        // In a zone at UTC-5, the same wall times are five hours later in UTC.
        let east = schedule.position(at: Self.utc(2026, 12, 14, 17, 30), in: FixedOffsetZone(seconds: -5 * 3600))
        #expect(east.current?.window.name == "lunch" && east.current?.closes == Self.utc(2026, 12, 14, 18))
    }

    @Test("a window open all day on consecutive days is one window in force across midnight, closing at the last day's end")
    func allDay() throws {
        let schedule = try WindowSchedule([try Self.window("weekend", days: "sat,sun", hours: "00:00-24:00")])
        let utc = FixedOffsetZone(seconds: 0)
        let saturday = schedule.position(at: Self.utc(2026, 12, 12, 23, 59, 59), in: utc)
        let sunday = schedule.position(at: Self.utc(2026, 12, 13, 0, 0, 1), in: utc)
        #expect(saturday.current?.window == sunday.current?.window && sunday.current?.window.name == "weekend")
        #expect(sunday.current?.closes == Self.utc(2026, 12, 14, 0))
    }

    @Test("no windows: never in force, no change coming")
    func empty() {
        let position = WindowSchedule.none.position(at: 1_800_000_000, in: FixedOffsetZone(seconds: 0))
        #expect(position.current == nil && position.next == nil && position.changesAt == nil)
    }

    @Test("DST: the night the clocks go forward a night window is an hour shorter; back, an hour longer")
    func daylightSaving() throws {
        let zone = CentralEuropeLike()
        let schedule = try WindowSchedule([try Self.window("night", hours: "22:00-06:00")])
        // Saturday 2026-03-28 22:00 local (21:00 UTC) to Sunday 06:00 local, now UTC+2 (04:00 UTC): 7 h.
        let spring = schedule.position(at: Self.utc(2026, 3, 28, 23), in: zone).current!
        #expect(spring.opens == Self.utc(2026, 3, 28, 21) && spring.closes == Self.utc(2026, 3, 29, 4))
        // Saturday 2026-10-24 22:00 local (20:00 UTC) to Sunday 06:00 local, now UTC+1 (05:00 UTC): 9 h.
        let autumn = schedule.position(at: Self.utc(2026, 10, 24, 23), in: zone).current!
        #expect(autumn.opens == Self.utc(2026, 10, 24, 20) && autumn.closes == Self.utc(2026, 10, 25, 5))
    }

    @Test("DST: a window opening in the skipped hour opens at the change; one in the repeated hour at its first occurrence")
    func skippedAndRepeatedHours() throws {
        let zone = CentralEuropeLike()
        // 02:30 does not exist on 2026-03-29: the window opens at the jump, 01:00 UTC (03:00 local).
        #expect(zone.instant(of: CivilDate(year: 2026, month: 3, day: 29), second: 9000) == CentralEuropeLike.springForward)
        // 02:30 happens twice on 2026-10-25: first at 00:30 UTC (UTC+2), then at 01:30 UTC.
        #expect(zone.instant(of: CivilDate(year: 2026, month: 10, day: 25), second: 9000) == Self.utc(2026, 10, 25, 0, 30))
        let schedule = try WindowSchedule([try Self.window("early", hours: "02:30-04:00")])
        let spring = schedule.position(at: Self.utc(2026, 3, 29, 1, 30), in: zone).current!
        #expect(spring.opens == CentralEuropeLike.springForward && spring.closes == Self.utc(2026, 3, 29, 2))
        // A window wholly inside the skipped hour does not open that night.
        let skipped = try WindowSchedule([try Self.window("gap", hours: "02:10-02:50")])
        let next = skipped.position(at: Self.utc(2026, 3, 28, 23), in: zone).next!
        #expect(next.opens == Self.utc(2026, 3, 30, 0, 10))
    }

    @Test("two windows open at the same wall time on some day are refused, naming both and the day")
    func overlap() throws {
        #expect(throws: CalendarWindowError.overlap(first: "night", second: "late", on: "fri")) {
            try WindowSchedule([try Self.window("night", days: "mon-fri", hours: "22:00-06:00"), try Self.window("late", days: "fri", hours: "23:00-23:30")])
        }
        // Crossing Sunday night into Monday.
        #expect(throws: CalendarWindowError.overlap(first: "sunday-night", second: "monday-early", on: "mon")) {
            try WindowSchedule([
                try Self.window("sunday-night", days: "sun", hours: "23:00-02:00"), try Self.window("monday-early", days: "mon", hours: "01:00-03:00"),
            ])
        }
        // Adjacent windows do not overlap.
        _ = try WindowSchedule([try Self.window("a", hours: "00:00-12:00"), try Self.window("b", hours: "12:00-24:00")])
    }

    @Test("list patterns: * and ? match names; other characters are themselves")
    func globs() {
        #expect(GlobPattern.matches("nightly-*", "nightly-2026-12-06"))
        #expect(GlobPattern.matches("nightly-*", "nightly-"))
        #expect(!GlobPattern.matches("nightly-*", "daily-1"))
        #expect(GlobPattern.matches("*-batch-??", "x-batch-12"))
        #expect(!GlobPattern.matches("*-batch-??", "x-batch-123"))
        #expect(GlobPattern.matches("*a*b*", "xxaYYbzz"))
        #expect(!GlobPattern.matches("[ab]", "a"))
        #expect(GlobPattern.matches("[ab]", "[ab]"))
    }
}
