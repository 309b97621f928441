/// A value in a TOML 1.0 document.
///
/// Integers are 64-bit (TOML's range); floats are IEEE 754 binary64, `inf` and `nan` included.
/// Date-times keep the four kinds TOML tells apart: with an offset, local date-time, local
/// date, local time.
public enum TOMLValue: Sendable, Equatable, CustomStringConvertible {
    case string(String)
    case integer(Int)
    case float(Double)
    case boolean(Bool)
    /// A date and time; `offsetMinutes` nil is a local date-time (no zone).
    case dateTime(TOMLDate, TOMLTime, offsetMinutes: Int?)
    case date(TOMLDate)
    case time(TOMLTime)
    case array([TOMLValue])
    /// An inline table, a `[table]`, or one element of an array of tables.
    case table(TOMLTable)

    /// How a value reads in an error message: `"text"`, `16`, `[1, 2]`, `{ a = 1 }`.
    public var description: String {
        switch self {
        case .string(let text): "\"\(text)\""
        case .integer(let value): "\(value)"
        case .float(let value): value.isNaN ? "nan" : value.isInfinite ? (value < 0 ? "-inf" : "inf") : "\(value)"
        case .boolean(let value): "\(value)"
        case .dateTime(let date, let time, let offset):
            "\(date)T\(time)" + (offset.map(Self.offsetText) ?? "")
        case .date(let date): "\(date)"
        case .time(let time): "\(time)"
        case .array(let values): "[" + values.map(\.description).joined(separator: ", ") + "]"
        case .table(let table):
            "{ " + table.entries.map { "\($0.key) = \($0.value)" }.joined(separator: ", ") + " }"
        }
    }

    /// The TOML type's name, for "expected …, found …" messages.
    public var typeName: String {
        switch self {
        case .string: "a string"
        case .integer: "an integer"
        case .float: "a float"
        case .boolean: "a boolean"
        case .dateTime: "a date-time"
        case .date: "a date"
        case .time: "a time"
        case .array: "an array"
        case .table: "a table"
        }
    }

    private static func offsetText(_ minutes: Int) -> String {
        guard minutes != 0 else { return "Z" }
        let size = abs(minutes)
        return (minutes < 0 ? "-" : "+") + twoDigits(size / 60) + ":" + twoDigits(size % 60)
    }
}

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
        String(repeating: "0", count: max(0, 4 - "\(year)".count)) + "\(year)-" + twoDigits(month) + "-" + twoDigits(day)
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

    public var description: String {
        var text = twoDigits(hour) + ":" + twoDigits(minute) + ":" + twoDigits(second)
        if nanosecond > 0 {
            var fraction = "\(nanosecond)"
            fraction = String(repeating: "0", count: 9 - fraction.count) + fraction
            while fraction.hasSuffix("0") { fraction.removeLast() }
            text += "." + fraction
        }
        return text
    }
}

private func twoDigits(_ value: Int) -> String { value < 10 ? "0\(value)" : "\(value)" }
