import ArgumentParser
import ImgdCore
import ImgdDaemon

/// Sizes on the command line: `1GiB`, `64 MiB`, `500MB`, or plain bytes.
extension ByteCount: ExpressibleByArgument {
    public init?(argument: String) {
        guard let parsed = try? ByteCount(parsing: argument) else { return nil }
        self = parsed
    }

    public var defaultValueDescription: String { description }
}

/// Durations on the command line: `30m`, `12h`, `7d` (a bare number is seconds).
struct DurationArgument: ExpressibleByArgument, Sendable {
    let duration: Duration
    let text: String

    init(_ text: String, _ duration: Duration) {
        self.text = text
        self.duration = duration
    }

    /// `duration`, shown as a flag would spell it (`7d`).
    init(_ duration: Duration) {
        self.init(DaemonSetting.spell(duration: duration), duration)
    }

    init?(argument: String) {
        guard let parsed = try? Duration.parsing(argument) else { return nil }
        self.init(argument, parsed)
    }

    var defaultValueDescription: String { text }
}
