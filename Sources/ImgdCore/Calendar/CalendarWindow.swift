/// One `[window."NAME"]` table: when it is open (days and hours, local time) and what it
/// changes while it is: the transfer cap, the bandwidth cap, and which lists may run.
public struct CalendarWindow: Hashable, Sendable {
    public let name: String
    /// The days it opens on; a window that crosses midnight closes on the day after.
    public var days: WeekdaySet = .everyDay
    public var hours: DailyHours
    /// `max-parallel` while open; nil keeps the top-level setting.
    public var maxParallel: Int?
    /// `max-rate` while open, bytes a second: 0 is no cap; nil keeps the top-level setting.
    public var maxRate: Int?
    /// Glob patterns (`nightly-*`) of list names that run only while this window (or another
    /// window naming them) is open.
    public var lists: [String] = []

    public init(name: String, days: WeekdaySet = .everyDay, hours: DailyHours) {
        self.name = name
        self.days = days
        self.hours = hours
    }
}

/// An opening of a window: the instants it opens and closes, in seconds since 1970 UTC.
public struct WindowOpening: Hashable, Sendable {
    public let window: CalendarWindow
    public let opens: Int64
    public let closes: Int64
}

/// Where the calendar stands at an instant: the window in force (if any) and the next change.
public struct WindowPosition: Hashable, Sendable {
    /// The opening in force, or nil outside every window.
    public let current: WindowOpening?
    /// The next window to open after `current` closes (or after now, outside every window);
    /// nil when no window opens in the coming week.
    public let next: WindowOpening?

    /// The next instant the position changes: the current window's close, else the next open.
    public var changesAt: Int64? { current?.closes ?? next?.opens }
}
