import ImgdDaemon
import Logging

/// A `LogHandler` that hands each line to a closure, for tests that read what a part of the
/// daemon logged: the message and its metadata (the logger's and the call's), as the daemon's
/// own handler writes them (` key=value`).
struct ForwardingLogHandler: LogHandler {
    let forward: @Sendable (Logger.Level, String) -> Void
    var logLevel: Logger.Level = .trace
    var metadata: Logger.Metadata = [:]

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let merged = event.metadata.map { metadata.merging($0) { $1 } } ?? metadata
        forward(event.level, "\(event.message)" + JournalLogHandler.formatted(merged))
    }
}

extension Logger {
    /// A logger handing each message's text to `append`.
    static func forwarding(_ append: @escaping @Sendable (String) -> Void) -> Logger {
        Logger(label: "test") { _ in ForwardingLogHandler { _, text in append(text) } }
    }

    /// A logger that drops everything.
    static var discarding: Logger { Logger(label: "test") { _ in SwiftLogNoOpLogHandler() } }
}
