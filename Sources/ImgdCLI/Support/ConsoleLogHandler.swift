import ImgdDaemon
import Logging

/// A `LogHandler` for the command-line tools: each message becomes one `imgd: …` line through
/// the ``Console`` (escaped there, and clear of the progress line). Metadata follows the
/// message as ` key=value` pairs (``JournalLogHandler/formatted(_:)``).
struct ConsoleLogHandler: LogHandler {
    let console: Console
    var logLevel: Logger.Level = .info
    var metadata: Logger.Metadata = [:]

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let merged = event.metadata.map { metadata.merging($0) { $1 } } ?? metadata
        console.message("imgd: \(event.message)", escapedTail: JournalLogHandler.formatted(merged))
    }
}
