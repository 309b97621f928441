import ImgdBase
import ImgdProtocol

/// Numbers for people: sizes in binary units, durations in the two largest units, counts with
/// thousands separators.
public enum HumanFormat {
    /// "900 B", "1.5 KiB", "64 MiB", "1.2 GiB": ImgdCore's ``ByteCount`` wording, so `imgctl`
    /// prints sizes as `imgd`'s flags read them.
    public static func size(_ bytes: Int) -> String {
        ByteCount(bytes).description
    }

    /// "0.4s", "12s", "4m 10s", "3h 12m", "2d 5h": at most two units, the smaller rounded down.
    public static func duration(seconds: Double) -> String {
        guard seconds.isFinite, seconds >= 0 else { return "-" }
        if seconds < 10, seconds.rounded(.down) != seconds {
            let tenths = Int((seconds * 10).rounded())
            return "\(tenths / 10).\(tenths % 10)s"
        }
        let total = Int(seconds)
        let units: [(name: String, seconds: Int)] = [("d", 86_400), ("h", 3600), ("m", 60), ("s", 1)]
        for (index, unit) in units.enumerated() where total >= unit.seconds || unit.seconds == 1 {
            let major = total / unit.seconds
            guard index + 1 < units.count else { return "\(major)\(unit.name)" }
            let next = units[index + 1]
            let minor = (total % unit.seconds) / next.seconds
            return minor == 0 ? "\(major)\(unit.name)" : "\(major)\(unit.name) \(minor)\(next.name)"
        }
        return "\(total)s"
    }

    /// Text from the daemon or the command line (a list's name, a URL, a message) as it may be
    /// shown on a terminal: control characters (C0, DEL, C1) and invalid UTF-8 escaped (`\n`,
    /// `\x1b`, `\u009b`), so a name cannot move the cursor or rewrite the screen. Never cut:
    /// the daemon's replies are bounded already, and a URL is copied whole.
    public static func text(_ text: String) -> String {
        EchoedText.escape(text, limit: nil)
    }

    /// "1,234,567": thousands separated by commas (fixed, not locale-dependent, so scripts and
    /// tests see the same text everywhere).
    public static func count(_ value: Int) -> String {
        let digits = String(value.magnitude)
        var grouped = ""
        for (offset, digit) in digits.enumerated() {
            if offset > 0, (digits.count - offset) % 3 == 0 { grouped.append(",") }
            grouped.append(digit)
        }
        return value < 0 ? "-" + grouped : grouped
    }

    /// A coming moment (milliseconds since the epoch) as the time left: "in 3h 10m".
    static func fromNow(milliseconds: Int, now: Double = Double(WallClock.systemMilliseconds()) / 1000) -> String {
        "in " + duration(seconds: max(0, Double(milliseconds) / 1000 - now).rounded(.up))
    }

    /// A moment the daemon reported, for a table: "3m 10s ago" for a number (milliseconds since
    /// the epoch, as `lists` sends `claimed_at`; seconds when too small to be milliseconds), as
    /// given for text (RFC 3339, as the spool's reports write it), "-" for anything else.
    static func moment(_ value: JSONValue?, now: Double = Double(WallClock.systemMilliseconds()) / 1000) -> String {
        switch value {
        case .string(let text):
            return self.text(text)
        case .some(let number) where number.doubleValue != nil:
            let raw = number.doubleValue!
            // 1e11 ms is 1973; 1e11 s is the year 5138: a value above it is milliseconds.
            let seconds = raw >= 1e11 ? raw / 1000 : raw
            let age = max(0, now - seconds)
            return duration(seconds: age.rounded(.down)) + " ago"
        default:
            return "-"
        }
    }
}
