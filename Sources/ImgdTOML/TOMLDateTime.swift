/// A calendar date (year 0–9999), checked: the day exists in its month.
public struct TOMLDate: Sendable, Hashable, CustomStringConvertible {
    public var year: Int
    public var month: Int
    public var day: Int

    public init(year: Int, month: Int, day: Int) {
        self.year = year
        self.month = month
        self.day = day
    }

    public var description: String {
        String(repeating: "0", count: max(0, 4 - "\(year)".count)) + "\(year)-" + TOMLTime.twoDigits(month) + "-" + TOMLTime.twoDigits(day)
    }

    /// Days in `month` of `year` (Gregorian; February 29 in leap years).
    static func days(inMonth month: Int, of year: Int) -> Int {
        switch month {
        case 2: (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }
}

/// A time of day; `second` may be 60 (a leap second); fractions kept to the nanosecond.
public struct TOMLTime: Sendable, Hashable, CustomStringConvertible {
    public var hour: Int
    public var minute: Int
    public var second: Int
    public var nanosecond: Int

    public init(hour: Int, minute: Int, second: Int, nanosecond: Int = 0) {
        self.hour = hour
        self.minute = minute
        self.second = second
        self.nanosecond = nanosecond
    }

    /// `7` as `07`, for dates, times and offsets.
    static func twoDigits(_ value: Int) -> String { value < 10 ? "0\(value)" : "\(value)" }

    public var description: String {
        var text = TOMLTime.twoDigits(hour) + ":" + TOMLTime.twoDigits(minute) + ":" + TOMLTime.twoDigits(second)
        if nanosecond > 0 {
            var fraction = "\(nanosecond)"
            fraction = String(repeating: "0", count: 9 - fraction.count) + fraction
            while fraction.hasSuffix("0") { fraction.removeLast() }
            text += "." + fraction
        }
        return text
    }
}
