/// The days a calendar window opens on: `*`, `mon-fri`, `sat,sun`, `mon,wed-fri`, `fri-mon` (a
/// range may wrap past Sunday). Names are the first three letters of the English day names, in
/// any case.
public struct WeekdaySet: Hashable, Sendable, CustomStringConvertible {
    /// Bit `n` set: day `n` (Monday 0 … Sunday 6) is in the set.
    public let bits: UInt8

    public static let names = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
    public static let everyDay = WeekdaySet(bits: 0x7F)

    init(bits: UInt8) { self.bits = bits }

    public init(parsing text: String) throws(CalendarWindowError) {
        let trimmed = text.trimmingSpaces
        if trimmed == "*" {
            self = .everyDay
            return
        }
        var bits: UInt8 = 0
        for part in trimmed.split(separator: ",", omittingEmptySubsequences: false) {
            let range = part.split(separator: "-", omittingEmptySubsequences: false).map { String($0).trimmingSpaces.lowercased() }
            guard (1...2).contains(range.count), let first = Self.names.firstIndex(of: range[0]),
                let last = range.count == 2 ? Self.names.firstIndex(of: range[1]) : first
            else {
                throw CalendarWindowError.days(EchoedText.cut(text, limit: 40))
            }
            var day = first
            while true {
                bits |= 1 << UInt8(day)
                if day == last { break }
                day = (day + 1) % 7
            }
        }
        self.bits = bits
    }

    public func contains(_ weekday: Int) -> Bool { bits & (1 << UInt8(weekday)) != 0 }

    /// `mon,tue,wed` or `*`.
    public var description: String {
        bits == 0x7F ? "*" : Self.names.indices.filter(contains).map { Self.names[$0] }.joined(separator: ",")
    }
}

extension String {
    /// Without leading and trailing spaces and tabs.
    var trimmingSpaces: String {
        var scalars = Substring(self)
        while let first = scalars.first, first == " " || first == "\t" { scalars.removeFirst() }
        while let last = scalars.last, last == " " || last == "\t" { scalars.removeLast() }
        return String(scalars)
    }
}
