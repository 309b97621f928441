import ImgdCore
import ImgdTOML

/// The `[window."NAME"]` tables of the configuration file: calendar windows that change the
/// transfer and bandwidth caps by weekday and time of day, and hold lists to their hours.
///
/// ```toml
/// [window."night"]
/// days = "mon-fri"          # or "*" (the default), "sat,sun"
/// hours = "22:00-06:00"     # local time (TZ); may cross midnight
/// max-rate = "0"            # 0: no cap in this window
/// max-parallel = 32
/// lists = ["nightly-*"]     # lists so named run only inside this window
/// ```
enum CalendarWindowTables {
    /// The keys a window table may hold.
    static let keys = ["days", "hours", "max-parallel", "max-rate", "lists"]

    /// Reads the `window` table of the file: one subtable per window, in the order written.
    static func windows(from value: TOMLValue, origin: (Int) -> String, line: Int) throws(ConfigError) -> WindowSchedule {
        guard case .table(let named) = value else {
            throw ConfigError(origin: origin(line), reason: #"window: expected tables such as [window."night"], found \#(value.typeName)"#)
        }
        var windows: [CalendarWindow] = []
        for entry in named.entries {
            let name = entry.key
            guard !name.isEmpty, name.utf8.count <= 64, name.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F }) else {
                throw ConfigError(
                    origin: origin(entry.line),
                    reason: "[window.\"\(EchoedText.cut(name, limit: 40))\"]: a window's name is 1 to 64 printable ASCII characters without spaces")
            }
            guard case .table(let table) = entry.value else {
                throw ConfigError(origin: origin(entry.line), reason: "window.\"\(name)\": expected a table of settings, found \(entry.value.typeName)")
            }
            windows.append(try window(named: name, table, origin: origin, line: entry.line))
        }
        do {
            return try WindowSchedule(windows)
        } catch {
            throw ConfigError(origin: origin(line), reason: "[window]: \(error)")
        }
    }

    private static func window(named name: String, _ table: TOMLTable, origin: (Int) -> String, line: Int) throws(ConfigError) -> CalendarWindow {
        var days = WeekdaySet.everyDay
        var hours: DailyHours?
        var maxParallel: Int?, maxRate: Int?
        var lists: [String] = []
        for setting in table.entries {
            let place = origin(setting.line)
            let label = "[window.\"\(name)\"] \(setting.key)"
            do throws(SettingError) {
                switch setting.key {
                case "days":
                    let text = try setting.value.text()
                    do {
                        days = try WeekdaySet(parsing: text)
                    } catch {
                        throw SettingError(reason: "\(error)")
                    }
                case "hours":
                    let text = try setting.value.text()
                    do {
                        hours = try DailyHours(parsing: text)
                    } catch {
                        throw SettingError(reason: "\(error)")
                    }
                case "max-parallel":
                    guard case .integer(let cap) = setting.value, (1...1024).contains(cap) else {
                        throw SettingError(reason: "expected a whole number from 1 to 1024, found \(setting.value)")
                    }
                    maxParallel = cap
                case "max-rate":
                    let rate = try DaemonSetting.byteCount(setting.value)
                    guard rate == 0 || rate >= DaemonConfig.minimumMaxRate else {
                        throw SettingError(reason: "0 (no cap) or at least \(ByteCount(DaemonConfig.minimumMaxRate)) a second")
                    }
                    maxRate = rate
                case "lists":
                    guard case .array(let items) = setting.value else {
                        throw SettingError(reason: "expected an array of list name patterns such as [\"nightly-*\"], found \(setting.value.typeName)")
                    }
                    lists = []
                    for item in items {
                        guard case .string(let pattern) = item, !pattern.isEmpty, pattern.utf8.count <= 255 else {
                            throw SettingError(reason: "expected list name patterns (non-empty strings of at most 255 bytes), found \(item.typeName)")
                        }
                        lists.append(pattern)
                    }
                default:
                    throw SettingError(reason: "unknown setting (known: \(keys.joined(separator: ", ")))")
                }
            } catch {
                throw ConfigError(origin: place, reason: "\(label): \(error.reason)")
            }
        }
        guard let hours else {
            throw ConfigError(origin: origin(line), reason: "[window.\"\(name)\"]: hours is missing (such as hours = \"22:00-06:00\")")
        }
        var window = CalendarWindow(name: name, days: days, hours: hours)
        window.maxParallel = maxParallel
        window.maxRate = maxRate
        window.lists = lists
        return window
    }

    /// How a reload logs the windows.
    static func summary(_ schedule: WindowSchedule) -> String {
        guard !schedule.isEmpty else { return "none" }
        return schedule.windows.map { window in
            var parts = ["days: \(window.days)", "hours: \(window.hours)"]
            if let cap = window.maxParallel { parts.append("max-parallel: \(cap)") }
            if let rate = window.maxRate { parts.append("max-rate: " + (rate == 0 ? "0 (no cap)" : "\(ByteCount(rate))/s")) }
            if !window.lists.isEmpty { parts.append("lists: \(window.lists.joined(separator: ","))") }
            return "\(window.name) (\(parts.joined(separator: "; ")))"
        }.joined(separator: "; ")
    }
}
