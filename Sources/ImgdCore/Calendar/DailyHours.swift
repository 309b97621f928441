/// The hours of the day a calendar window is open, in local time: `22:00-06:00` (crossing
/// midnight: it closes on the next day), `09:30-17:00`, `00:00-24:00` (all day), to the second
/// when needed (`21:59:30-22:10:00`). The start is included, the end is not.
public struct DailyHours: Hashable, Sendable, CustomStringConvertible {
    /// Seconds into the day the window opens (0 ..< 86,400).
    public let start: Int
    /// Seconds into the day it closes (1 ... 86,400; an end of 00:00 is 86,400); not after
    /// `start` means the next day.
    public let end: Int

    public init(start: Int, end: Int) {
        self.start = start
        self.end = end
    }

    public init(parsing text: String) throws(CalendarWindowError) {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 2, let start = Self.second(of: String(parts[0]).trimmingSpaces),
            let end = Self.second(of: String(parts[1]).trimmingSpaces), start < 86_400
        else {
            throw CalendarWindowError.hours(EchoedText.cut(text, limit: 40))
        }
        // 00:00-00:00 is refused with 10:00-10:00: whole day or nothing cannot be told.
        guard start != end else { throw CalendarWindowError.emptyHours(text) }
        self.start = start
        // 00:00 as an end is midnight at the end of the day, as 24:00 is (22:00-00:00).
        self.end = end == 0 ? 86_400 : end
    }

    /// Whether the window closes on the day after it opens.
    public var crossesMidnight: Bool { end <= start }

    /// How long it is open, in seconds of wall time.
    public var length: Int { crossesMidnight ? 86_400 - start + end : end - start }

    /// `HH:MM` or `HH:MM:SS` (`24:00` only as an end).
    static func second(of text: String) -> Int? {
        let fields = text.split(separator: ":", omittingEmptySubsequences: false)
        guard (2...3).contains(fields.count), fields.allSatisfy({ $0.count == 2 && $0.allSatisfy(\.isASCIIDigit) }) else { return nil }
        let numbers = fields.map { Int($0)! }
        let (hour, minute, second) = (numbers[0], numbers[1], numbers.count == 3 ? numbers[2] : 0)
        guard minute < 60, second < 60, hour < 24 || (hour == 24 && minute == 0 && second == 0) else { return nil }
        return hour * 3600 + minute * 60 + second
    }

    public var description: String { "\(Self.spell(start))-\(Self.spell(end))" }

    static func spell(_ second: Int) -> String {
        func two(_ value: Int) -> String { value < 10 ? "0\(value)" : "\(value)" }
        let text = "\(two(second / 3600)):\(two(second / 60 % 60))"
        return second % 60 == 0 ? text : text + ":\(two(second % 60))"
    }
}

extension Character {
    var isASCIIDigit: Bool { ("0"..."9").contains(self) }
}
