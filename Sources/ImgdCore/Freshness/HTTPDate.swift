/// HTTP dates (`Date`, `Expires`, `Last-Modified`) read into milliseconds since 1970, without
/// Foundation: the preferred IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), and the obsolete
/// RFC 850 (`Sunday, 06-Nov-94 08:49:37 GMT`) and asctime (`Sun Nov  6 08:49:37 1994`) forms
/// that RFC 9110 says a recipient must accept.
public enum HTTPDate {
    private static let months = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]

    /// Milliseconds since 1970 of `text`, or nil when it is not an HTTP date. Texts longer than
    /// 64 bytes are refused unread (a header is attacker-controlled).
    public static func milliseconds(_ text: String) -> Int? {
        guard text.utf8.count <= 64 else { return nil }
        let words = text.split(whereSeparator: { $0 == " " || $0 == "," || $0 == "-" }).map { $0.lowercased() }
        var day: Int?, month: Int?, year: Int?, time: (Int, Int, Int)?
        for word in words {
            if let index = months.firstIndex(where: { word.hasPrefix($0) && word.count == 3 }) {
                month = index + 1
            } else if word.contains(":") {
                let parts = word.split(separator: ":").compactMap { Int($0) }
                guard parts.count == 3, parts[0] < 24, parts[1] < 60, parts[2] < 61 else { return nil }
                time = (parts[0], parts[1], parts[2])
            } else if let number = Int(word) {
                if day == nil, word.count <= 2, month == nil || year == nil {
                    day = number
                } else {
                    year = number
                }
            }
        }
        guard let day, let month, var year, let time, (1...31).contains(day) else { return nil }
        // RFC 850's two-digit years: 50 and above are the last century.
        if year < 100 { year += year >= 50 ? 1900 : 2000 }
        guard (1970...9999).contains(year) else { return year < 1970 ? 0 : nil }
        let days = daysSinceEpoch(year: year, month: month, day: day)
        return ((days * 24 + time.0) * 60 + time.1) * 60_000 + time.2 * 1000
    }

    /// Whether `text` has an IMF-fixdate's shape (`Sun, 06 Nov 1994 08:49:37 GMT`: 29 printable
    /// ASCII bytes, a comma after the day's name, ending in ` GMT`), so it can be sent on as it
    /// is without reading it: what an origin's `Last-Modified` almost always is.
    public static func looksLikeIMFFixdate(_ text: String) -> Bool {
        guard text.utf8.count == 29 else { return false }
        for (index, byte) in text.utf8.enumerated() {
            guard byte >= 0x20, byte < 0x7f else { return false }
            let expected: UInt8? = switch index {
            case 3: UInt8(ascii: ",")
            case 4, 25: UInt8(ascii: " ")
            case 26: UInt8(ascii: "G")
            case 27: UInt8(ascii: "M")
            case 28: UInt8(ascii: "T")
            default: nil
            }
            if let expected, byte != expected { return false }
        }
        return true
    }

    /// `milliseconds` since 1970 as an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), the form
    /// a sender must use (`Last-Modified`, `Date`); the milliseconds are dropped, and an instant
    /// before 1970 is written as 1970's first second.
    public static func format(milliseconds: Int) -> String {
        let seconds = max(milliseconds, 0) / 1000
        let days = seconds / 86_400, secondOfDay = seconds % 86_400
        let (year, month, day) = civil(daysSinceEpoch: days)
        // 1970-01-01 was a Thursday.
        let weekday = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"][days % 7]
        let monthName = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"][month - 1]
        return "\(weekday), \(twoDigits(day)) \(monthName) \(year) \(twoDigits(secondOfDay / 3600)):"
            + "\(twoDigits(secondOfDay / 60 % 60)):\(twoDigits(secondOfDay % 60)) GMT"
    }

    private static func twoDigits(_ value: Int) -> String { value < 10 ? "0\(value)" : "\(value)" }

    /// The date `days` after 1970-01-01 (the inverse of ``daysSinceEpoch(year:month:day:)``;
    /// H. Hinnant's civil-from-days).
    static func civil(daysSinceEpoch days: Int) -> (year: Int, month: Int, day: Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let shiftedMonth = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * shiftedMonth + 2) / 5 + 1
        let month = shiftedMonth < 10 ? shiftedMonth + 3 : shiftedMonth - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }

    /// Days from 1970-01-01 to the date (the proleptic Gregorian calendar; H. Hinnant's
    /// days-from-civil).
    static func daysSinceEpoch(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }
}
