import ImgdCore

/// Which lists may run now: a list whose name a calendar window's `lists` matches runs only
/// while one of those windows is open.
public struct ListWindowGate: Sendable, Equatable {
    public var schedule: WindowSchedule
    /// The window open now, if any.
    public var open: String?

    public static let none = ListWindowGate(schedule: .none, open: nil)

    public init(schedule: WindowSchedule, open: String?) {
        self.schedule = schedule
        self.open = open
    }

    /// The windows the list named `name` waits for; empty when it may run now (held to no
    /// window, or to the open one).
    public func holding(_ name: String) -> [String] {
        guard !schedule.isEmpty else { return [] }
        let windows = schedule.windows(holding: name)
        if windows.isEmpty { return [] }
        if let open, windows.contains(open) { return [] }
        return windows
    }
}
