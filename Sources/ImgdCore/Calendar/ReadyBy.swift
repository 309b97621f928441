/// When a link list must be warmed by: its `# ready-by:` header, a JSON list's `ready_by`, or
/// `add`'s `ready_by`.
///
/// Three forms are read:
/// - an instant, RFC 3339 / ISO 8601 with a zone: `2026-12-07T05:30:00Z`,
///   `2026-12-07T06:30+01:00`, `2026-12-07T05:30:00.250Z` (a fraction is kept to the millisecond);
/// - a local date and time without a zone, `2026-12-07T05:30` (the daemon's `TZ`);
/// - a local time of day, `05:30` or `05:30:15`: the next time local clocks show it after the
///   list is claimed (tomorrow's when today's has passed).
///
/// The local forms become an instant with ``deadline(afterMilliseconds:in:)``, under the same
/// daylight-saving rules as calendar windows (``LocalZone/instant(of:second:)``).
public enum ReadyBy: Sendable, Equatable, CustomStringConvertible {
    /// Milliseconds since 1970-01-01 UTC.
    case instant(milliseconds: Int64)
    /// A local date and wall time (seconds into the day), and milliseconds past that second.
    case localDateTime(CivilDate, second: Int, milliseconds: Int)
    /// A local wall time (seconds into the day): the next one.
    case timeOfDay(second: Int)

    /// The longest text read: a deadline is short, and a long one is junk.
    static let maximumLength = 64

    /// Reads `text` (surrounding spaces ignored) in one of the three forms.
    public init(parsing text: String) throws(ReadyByError) {
        let trimmed = text.trimmingSpaces
        guard !trimmed.isEmpty else { throw ReadyByError(text: text, reason: "it is empty") }
        guard trimmed.utf8.count <= Self.maximumLength else {
            throw ReadyByError(text: String(trimmed.prefix(Self.maximumLength)) + "…", reason: "it is longer than \(Self.maximumLength) characters")
        }
        // A date starts `YYYY-`; anything else is read as a time of day.
        let head = Array(trimmed.utf8.prefix(5))
        guard head.count == 5, head[..<4].allSatisfy({ (0x30...0x39).contains($0) }), head[4] == UInt8(ascii: "-") else {
            guard let second = DailyHours.second(of: trimmed), second < 86_400 else {
                throw ReadyByError(text: trimmed, reason: "a time of day is HH:MM or HH:MM:SS, from 00:00 to 23:59:59")
            }
            self = .timeOfDay(second: second)
            return
        }
        self = try Self.dateTime(trimmed)
    }

    /// `YYYY-MM-DDTHH:MM[:SS[.fff]][Z|±HH:MM]`.
    private static func dateTime(_ text: String) throws(ReadyByError) -> ReadyBy {
        let bytes = Array(text.utf8)
        var index = 0
        func number(_ count: Int) -> Int? {
            guard index + count <= bytes.count else { return nil }
            var value = 0
            for byte in bytes[index..<index + count] {
                guard (0x30...0x39).contains(byte) else { return nil }
                value = value * 10 + Int(byte - 0x30)
            }
            index += count
            return value
        }
        func expect(_ characters: String) -> Bool {
            guard index < bytes.count, characters.utf8.contains(bytes[index]) else { return false }
            index += 1
            return true
        }
        let shape = "an instant is written 2026-12-07T05:30:00Z (or with an offset, +01:00, or without one for local time)"
        guard let year = number(4), expect("-"), let month = number(2), expect("-"), let day = number(2), expect("Tt"),
            let hour = number(2), expect(":"), let minute = number(2)
        else { throw ReadyByError(text: text, reason: shape) }
        var second = 0
        var milliseconds = 0
        if expect(":") {
            guard let value = number(2) else { throw ReadyByError(text: text, reason: shape) }
            second = value
            if expect(".") {
                var digits = 0
                var scale = 100
                while index < bytes.count, (0x30...0x39).contains(bytes[index]) {
                    milliseconds += Int(bytes[index] - 0x30) * scale
                    scale /= 10
                    digits += 1
                    index += 1
                }
                guard digits > 0 else { throw ReadyByError(text: text, reason: shape) }
            }
        }
        guard year >= 1970 else { throw ReadyByError(text: text, reason: "the year \(year) is before 1970") }
        guard (1...12).contains(month), (1...CivilDate.days(inMonth: month, of: year)).contains(day) else {
            throw ReadyByError(text: text, reason: "there is no day \(day) in month \(month) of \(year)")
        }
        guard hour < 24, minute < 60, second < 60 else {
            throw ReadyByError(text: text, reason: "the time must be from 00:00:00 to 23:59:59")
        }
        let date = CivilDate(year: year, month: month, day: day)
        let wall = hour * 3600 + minute * 60 + second
        guard index < bytes.count else { return .localDateTime(date, second: wall, milliseconds: milliseconds) }
        var offset = 0
        if expect("Zz") {
            offset = 0
        } else if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") {
            let sign = bytes[index] == UInt8(ascii: "-") ? -1 : 1
            index += 1
            guard let hours = number(2), expect(":"), let minutes = number(2), hours < 24, minutes < 60 else {
                throw ReadyByError(text: text, reason: "a zone offset is written +HH:MM or -HH:MM")
            }
            offset = sign * (hours * 3600 + minutes * 60)
        } else {
            throw ReadyByError(text: text, reason: shape)
        }
        guard index == bytes.count else { throw ReadyByError(text: text, reason: "unexpected text after the zone") }
        let epochSecond = Int64(date.daysSinceEpoch) * 86_400 + Int64(wall - offset)
        return .instant(milliseconds: epochSecond * 1000 + Int64(milliseconds))
    }

    /// The deadline as milliseconds since 1970 UTC, for a list claimed at `now` (milliseconds
    /// since 1970) in the zone `zone`.
    public func deadline(afterMilliseconds now: Int64, in zone: any LocalZone) -> Int64 {
        switch self {
        case .instant(let milliseconds):
            return milliseconds
        case .localDateTime(let date, let second, let milliseconds):
            return zone.instant(of: date, second: second) * 1000 + Int64(milliseconds)
        case .timeOfDay(let second):
            let nowSecond = now >= 0 ? now / 1000 : (now - 999) / 1000
            let today = zone.wallTime(at: nowSecond).date
            // Today's, or the next day's when today's is not after now.
            for days in 0...2 {
                let instant = zone.instant(of: today.adding(days: days), second: second) * 1000
                if instant > now { return instant }
            }
            return zone.instant(of: today.adding(days: 3), second: second) * 1000
        }
    }

    public var description: String {
        func two(_ value: Int) -> String { value < 10 ? "0\(value)" : "\(value)" }
        switch self {
        case .instant(let milliseconds):
            return URLExpiry.iso8601(milliseconds: Int(milliseconds))
        case .localDateTime(let date, let second, let milliseconds):
            let fraction = milliseconds == 0 ? "" : "." + String(String(1000 + milliseconds).dropFirst())
            return "\(date)T\(two(second / 3600)):\(two(second / 60 % 60)):\(two(second % 60))\(fraction)"
        case .timeOfDay(let second):
            return DailyHours.spell(second)
        }
    }
}
