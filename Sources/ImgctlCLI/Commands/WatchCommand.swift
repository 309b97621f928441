import ArgumentParser
import ImgdProtocol

/// `imgctl watch`: follow the daemon's events.
struct WatchCommand: ImgctlSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "watch",
        abstract: "Print the daemon's events as they happen, until interrupted.",
        discussion: """
            Each event is a line `SEQ EVENT key=value ...` (with --json, the event line as sent). \
            Events: fetched, failed, evicted, list_claimed, list_done, memory_pressure, revalidated, \
            window, at_risk, on_track, \
            events_dropped. A gap in SEQ shows events that were not sent. Exit status 3 when the \
            daemon closes the connection (it stopped).
            """)

    @OptionGroup var connection: ConnectionOptions

    @Option(
        help: ArgumentHelp("Only these events, comma-separated (default: all).", valueName: "names"),
        transform: { text in text.split(separator: ",").map { $0.trimmingSpaces() }.filter { !$0.isEmpty } })
    var events: [String]?

    func execute(in context: ImgctlContext) throws(ImgctlError) {
        let session = try ControlSession(connection, context: context)
        var arguments: [String: JSONValue] = [:]
        if let events { arguments["events"] = .array(events.map(JSONValue.string)) }
        try session.call("subscribe", arguments)
        while true {
            switch try session.client.nextEvent(timeout: nil) {
            case .event(let event):
                session.output(session.json ? event.raw : EventFormatter.line(event))
            case .closed:
                throw .connectionLost(socket: session.client.socketPath)
            case .timedOut:
                continue  // no deadline was given; cannot happen
            }
        }
    }
}

extension Substring {
    /// Without leading and trailing spaces.
    fileprivate func trimmingSpaces() -> String {
        String(drop(while: { $0 == " " }).reversed().drop(while: { $0 == " " }).reversed())
    }
}
