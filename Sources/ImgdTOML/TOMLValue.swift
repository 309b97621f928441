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
        return (minutes < 0 ? "-" : "+") + TOMLTime.twoDigits(size / 60) + ":" + TOMLTime.twoDigits(size % 60)
    }
}
