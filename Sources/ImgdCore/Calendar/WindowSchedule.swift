/// The calendar windows of the configuration, in the order written, and the arithmetic of
/// where they stand at an instant in a zone.
///
/// Windows are laid on the local calendar: a window's days are the local days it opens on, its
/// hours local wall time. A daylight-saving change moves the instants, not the wall times: a
/// `22:00-06:00` window is an hour shorter or longer on the night the clocks change (see
/// ``LocalZone/instant(of:second:)`` for a wall time skipped or repeated).
public struct WindowSchedule: Hashable, Sendable {
    public let windows: [CalendarWindow]

    public static let none = WindowSchedule(checked: [])

    /// Refuses two windows open at the same wall time on some day: the limits in force would
    /// depend on which was written first.
    public init(_ windows: [CalendarWindow]) throws(CalendarWindowError) {
        for (index, first) in windows.enumerated() {
            for second in windows[(index + 1)...] {
                if let day = Self.sharedDay(first, second) {
                    throw CalendarWindowError.overlap(first: first.name, second: second.name, on: day)
                }
            }
        }
        self.windows = windows
    }

    private init(checked windows: [CalendarWindow]) { self.windows = windows }

    public var isEmpty: Bool { windows.isEmpty }

    /// The window in force at `instant` and the next one to open, looking one week ahead.
    public func position(at instant: Int64, in zone: some LocalZone) -> WindowPosition {
        guard !windows.isEmpty else { return WindowPosition(current: nil, next: nil) }
        let today = zone.wallTime(at: instant).date
        // Yesterday's openings may still be open (crossing midnight); a week and a day ahead
        // finds the next opening of any window.
        var openings: [WindowOpening] = []
        for offset in -1...8 {
            let date = today.adding(days: offset)
            for window in windows where window.days.contains(date.weekday) {
                let opens = zone.instant(of: date, second: window.hours.start)
                let closes = window.hours.crossesMidnight
                    ? zone.instant(of: date.adding(days: 1), second: window.hours.end)
                    : zone.instant(of: date, second: window.hours.end)
                // A window made empty by a clock change (wholly inside a skipped hour) does not open.
                if closes > opens { openings.append(WindowOpening(window: window, opens: opens, closes: closes)) }
            }
        }
        openings.sort { ($0.opens, $0.closes) < ($1.opens, $1.closes) }
        let current = openings.last { $0.opens <= instant && instant < $0.closes }
        let after = current?.closes ?? instant
        let next = openings.first { $0.opens >= after && $0 != current }
        return WindowPosition(current: current, next: next)
    }

    /// Lists held to windows: the names of the windows whose `lists` match `listName`, or an
    /// empty array when the list is held to none (it runs at any time).
    public func windows(holding listName: String) -> [String] {
        windows.filter { window in window.lists.contains { GlobPattern.matches($0, listName) } }.map(\.name)
    }

    /// A day of the week on which both windows are open at some same wall time, by name.
    private static func sharedDay(_ first: CalendarWindow, _ second: CalendarWindow) -> String? {
        // Each window as spans of the week's seconds, Monday 00:00 = 0, a span crossing Sunday
        // night split in two.
        func spans(_ window: CalendarWindow) -> [(Int, Int, Int)] {
            var spans: [(Int, Int, Int)] = []
            for day in 0..<7 where window.days.contains(day) {
                let start = day * 86_400 + window.hours.start
                let end = start + window.hours.length
                if end <= 7 * 86_400 {
                    spans.append((start, end, day))
                } else {
                    spans.append((start, 7 * 86_400, day))
                    spans.append((0, end - 7 * 86_400, day))
                }
            }
            return spans
        }
        for a in spans(first) {
            for b in spans(second) where a.0 < b.1 && b.0 < a.1 {
                return WeekdaySet.names[max(a.0, b.0) / 86_400 % 7]
            }
        }
        return nil
    }
}

/// Shell-style patterns for names: `*` any run of characters, `?` one character; nothing else
/// is special (a list's name has no slashes).
public enum GlobPattern {
    public static func matches(_ pattern: String, _ name: String) -> Bool {
        let pattern = Array(pattern.unicodeScalars), name = Array(name.unicodeScalars)
        var p = 0, n = 0
        var star: Int?, resume = 0
        while n < name.count {
            if p < pattern.count, pattern[p] == "?" || (pattern[p] != "*" && pattern[p] == name[n]) {
                p += 1
                n += 1
            } else if p < pattern.count, pattern[p] == "*" {
                star = p
                resume = n
                p += 1
            } else if let star {
                p = star + 1
                resume += 1
                n = resume
            } else {
                return false
            }
        }
        while p < pattern.count, pattern[p] == "*" { p += 1 }
        return p == pattern.count
    }
}
