import ImgdCore
import Logging

#if canImport(Glibc)
import Glibc
#endif

/// The daemon's `LogHandler`: one line per message on stderr, read by a person or by journald.
///
/// Under systemd, when `JOURNAL_STREAM` names the device and inode of our stderr, each line
/// starts with a syslog priority (`<3>` error … `<7>` debug) that journald turns into the
/// entry's priority; otherwise lines are plain `imgd: message` (with the level word for
/// warnings and errors). Metadata (`list`, `url`, `peer`, …) follows the message as
/// ` key=value` pairs in key order (``formatted(_:)``), so every line about one list or peer can
/// be found by its key, whatever its text says. Each line goes out in one `write(2)`, so lines from different threads never interleave.
///
/// A line is escaped here (``EchoedText``): control characters and invalid UTF-8 in it become
/// `\n`, `\x1b`, …; the message is cut after ``messageLimit`` bytes and each metadata value
/// after ``valueLimit``. So whatever a call site puts in a message or its metadata — a list's
/// name, a URL, a line of a list — it stays one line, and no name can forge a line of its own
/// (`evil\n<0>imgd: FAKE EMERGENCY` at emergency priority) or a `key=value` pair of its own
/// (`x" peer=root z="`: a value is escaped first, then quoted, its quotes escaped once). Call
/// sites do not escape (a backslash would show doubled).
public struct JournalLogHandler: LogHandler {
    /// Bytes of a line kept, at most (4 KiB): room for a few names and echoed lines, each cut
    /// at 512 bytes where it is quoted; past it a message is junk being echoed.
    public static let messageLimit = 4096
    /// Bytes of one metadata value kept, at most (a list's name, a URL).
    public static let valueLimit = 1024

    /// The level below which messages are dropped when none is set: `info`.
    public static let defaultLevel = Logger.Level.info

    /// The level, shared by every copy of this handler (every logger the daemon hands its
    /// parts): setting it on one — a reload's `log-level` — applies to all at once.
    public var logLevel: Logger.Level {
        get { level.value }
        nonmutating set { level.value = newValue }
    }

    public var metadata: Logger.Metadata = [:]

    private let level: SharedLogLevel
    private let journal: Bool
    private let descriptor: Int32

    /// A handler writing to `descriptor` (stderr by default) at `level` and above, with
    /// journald priorities when `environment`'s `JOURNAL_STREAM` matches the descriptor.
    public init(environment: [String: String], level: Logger.Level = defaultLevel, descriptor: Int32 = STDERR_FILENO) {
        self.descriptor = descriptor
        self.level = SharedLogLevel(level)
        journal = Self.isJournal(descriptor, stream: environment["JOURNAL_STREAM"])
    }

    /// A logger labelled `imgd` writing through a handler made as ``init(environment:level:descriptor:)`` does.
    public static func logger(
        environment: [String: String], level: Logger.Level = defaultLevel, descriptor: Int32 = STDERR_FILENO
    ) -> Logger {
        let handler = JournalLogHandler(environment: environment, level: level, descriptor: descriptor)
        return Logger(label: "imgd") { _ in handler }
    }

    /// True when the lines carry journald priorities.
    public var usesJournalPriorities: Bool { journal }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        let merged = event.metadata.map { metadata.merging($0) { $1 } } ?? metadata
        // The message escaped here; the metadata escaped value by value, once, by `formatted`.
        let message = EchoedText.escape(event.message.description, limit: Self.messageLimit) + Self.formatted(merged)
        let line: String
        if journal {
            line = "<\(Self.priority(of: event.level))>\(message)\n"
        } else {
            let word = switch event.level {
            case .error, .critical: "error: "
            case .warning: "warning: "
            default: ""
            }
            line = "imgd: \(word)\(message)\n"
        }
        // A log that cannot be written has nowhere to say so.
        try? writeAll(descriptor, Array(line.utf8))
    }

    /// `metadata` as it follows a message: ` key=value` pairs in key order (logfmt); a value
    /// that is empty or holds a space, a quote or `=` is quoted, its quotes and backslashes
    /// escaped. Empty when there is none.
    public static func formatted(_ metadata: Logger.Metadata) -> String {
        var text = ""
        for key in metadata.keys.sorted() {
            // Escaped first (control characters, invalid UTF-8; backslashes doubled), so the
            // quoting below is the only thing that puts a backslash before a quote: a logfmt
            // reader sees `\"` as a quote inside the value, never as its end.
            let value = EchoedText.escape("\(metadata[key]!)", limit: valueLimit)
            let plain = !value.isEmpty && !value.contains { $0 == " " || $0 == "\"" || $0 == "=" }
            var shown = plain ? value : "\""
            if !plain {
                for character in value {
                    if character == "\"" { shown.append("\\") }
                    shown.append(character)
                }
                shown.append("\"")
            }
            text += " \(EchoedText.escape(key, limit: valueLimit))=\(shown)"
        }
        return text
    }

    /// The syslog priority journald reads for `level` (trace and debug are both debug).
    static func priority(of level: Logger.Level) -> Int {
        switch level {
        case .trace, .debug: 7
        case .info: 6
        case .notice: 5
        case .warning: 4
        case .error: 3
        case .critical: 2
        }
    }

    /// `JOURNAL_STREAM` is `DEVICE:INODE` of the stream systemd connected; it only applies while
    /// our descriptor is still that stream (not redirected by a shell in between).
    static func isJournal(_ descriptor: Int32, stream: String?) -> Bool {
        guard let parts = stream?.split(separator: ":"), parts.count == 2,
            let device = UInt64(parts[0]), let inode = UInt64(parts[1])
        else { return false }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { return false }
        return UInt64(info.st_dev) == device && UInt64(info.st_ino) == inode
    }
}
