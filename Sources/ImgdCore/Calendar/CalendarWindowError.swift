/// Why a calendar window's table cannot be used; each names the value at fault.
public enum CalendarWindowError: Error, Sendable, Equatable, CustomStringConvertible {
    case days(String)
    case hours(String)
    case emptyHours(String)
    case overlap(first: String, second: String, on: String)

    public var description: String {
        switch self {
        case .days(let text):
            "days = '\(text)' is not a set of days such as \"*\", \"mon-fri\", \"sat,sun\" or \"mon,wed-fri\""
        case .hours(let text):
            "hours = '\(text)' is not a span such as \"22:00-06:00\" or \"09:30:00-17:00:00\" (local time; 24:00 only as an end)"
        case .emptyHours(let text):
            "hours = '\(text)' opens and closes at the same time: write \"00:00-24:00\" for a whole day"
        case .overlap(let first, let second, let day):
            "windows \"\(first)\" and \"\(second)\" are both open on \(day): at most one window may be in force at a time"
        }
    }
}
