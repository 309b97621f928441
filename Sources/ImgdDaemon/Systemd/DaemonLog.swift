import ImgdCore

#if canImport(Glibc)
import Glibc
#endif

/// The daemon's log: one line per event on stderr.
///
/// Under systemd, when `JOURNAL_STREAM` names the device and inode of our stderr, each line
/// starts with a syslog priority (`<3>` error … `<7>` debug) that journald turns into the
/// entry's priority; otherwise lines are plain `imgd: message` (with the level word for
/// warnings and errors). Each line goes out in one `write(2)`, so lines from different threads
/// never interleave.
///
/// A message is escaped here, whole (``EchoedText``): control characters and invalid UTF-8 in
/// it become `\n`, `\x1b`, … and it is cut after ``messageLimit`` bytes. So whatever a call
/// site puts in a message — a list's name, a URL, a line of a list — it stays one line, and no
/// name can forge a line of its own (`evil\n<0>imgd: FAKE EMERGENCY` at emergency priority).
/// Call sites do not escape (a backslash would show doubled).
public struct DaemonLog: Sendable {
    /// Bytes of a message kept, at most (4 KiB): room for a few names and echoed lines, each cut
    /// at 512 bytes where it is quoted; past it a message is junk being echoed.
    public static let messageLimit = 4096

    /// Syslog priorities, as journald reads them.
    public enum Level: Int32, Sendable {
        case error = 3, warning = 4, notice = 5, info = 6, debug = 7
    }

    private let journal: Bool
    private let descriptor: Int32

    /// A log on `descriptor` (stderr by default), with journald priorities when `environment`'s
    /// `JOURNAL_STREAM` matches it.
    public init(environment: [String: String], descriptor: Int32 = STDERR_FILENO) {
        self.descriptor = descriptor
        journal = Self.isJournal(descriptor, stream: environment["JOURNAL_STREAM"])
    }

    /// True when the log's lines carry journald priorities.
    public var usesJournalPriorities: Bool { journal }

    public func callAsFunction(_ message: String, level: Level = .info) {
        let message = EchoedText.escape(message, limit: Self.messageLimit)
        let line: String
        if journal {
            line = "<\(level.rawValue)>\(message)\n"
        } else {
            let word = switch level {
            case .error: "error: "
            case .warning: "warning: "
            default: ""
            }
            line = "imgd: \(word)\(message)\n"
        }
        var bytes = Array(line.utf8)
        var offset = 0
        while offset < bytes.count {
            let written = retryingOnInterrupt { bytes.withUnsafeMutableBytes { write(descriptor, $0.baseAddress! + offset, $0.count - offset) } }
            guard written > 0 else { return }
            offset += written
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
