import ArgumentParser
import ImgdBase
import ImgdProtocol

/// `imgctl add URL…`: queue URLs for download without waiting for them.
struct AddCommand: ImgctlSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "add",
        abstract: "Queue URLs for download (returns at once; see `get` to wait for one).",
        discussion: """
            Exit status 1 when the daemon rejects any URL (each is listed on stderr).
            With --ready-by the URLs become a link list with that deadline (kept across a \
            restart, shown by `imgctl lists`, reported in the spool's done/ or failed/).
            """)

    /// `add`'s priorities.
    enum Priority: String, ExpressibleByArgument, CaseIterable {
        case high, normal
    }

    @OptionGroup var connection: ConnectionOptions

    @Option(help: "Where the URLs go in the queue.")
    var priority: Priority = .normal

    @Option(
        help: ArgumentHelp(
            "Keep the images at least this long, whatever eviction wants (30m, 24h, 7d).", valueName: "duration"))
    var pin: String?

    @Option(
        name: .customLong("ready-by"),
        help: ArgumentHelp(
            "Make the URLs a list that must be warmed by then: 2026-12-07T05:30:00Z, or 05:30 (the next such local time).",
            valueName: "time"))
    var readyBy: String?

    @Option(help: ArgumentHelp("The name of the list --ready-by makes (default add-UID-TIME.json).", valueName: "name"))
    var name: String?

    @Argument(help: ArgumentHelp("The image URLs (http or https).", valueName: "url"))
    var urls: [String]

    func validate() throws {
        guard !urls.isEmpty else { throw ValidationError("Give at least one URL.") }
        if let pin {
            do {
                _ = try Duration.parsing(pin)
            } catch {
                throw ValidationError("--pin: \(error)")
            }
        }
        if name != nil, readyBy == nil { throw ValidationError("--name names the list --ready-by makes: give --ready-by too.") }
    }

    func execute(in context: ImgctlContext) throws(ImgctlError) {
        let session = try ControlSession(connection, context: context)
        var arguments: [String: JSONValue] = ["urls": .array(urls.map(JSONValue.string))]
        if priority != .normal { arguments["priority"] = .string(priority.rawValue) }
        if let pin { arguments["pin"] = .string(pin) }
        if let readyBy { arguments["ready_by"] = .string(readyBy) }
        if let name { arguments["name"] = .string(name) }
        let result = try session.call("add", arguments)
        let rejected = result["rejected"]?.arrayValue ?? []
        if !session.json {
            let accepted = result["accepted"]?.intValue ?? 0
            let urls = "\(HumanFormat.count(accepted)) URL\(accepted == 1 ? "" : "s")"
            if let list = result["list"]?.stringValue {
                let deadline = result["ready_by"]?.intValue.map { HumanFormat.fromNow(milliseconds: $0) } ?? "?"
                session.output("added list \(HumanFormat.text(list)) of \(urls), deadline \(deadline)")
            } else {
                session.output("queued \(urls)")
            }
            for entry in rejected {
                let url = entry["url"]?.stringValue ?? "?"
                let code = entry["code"]?.stringValue ?? "?"
                session.warn("imgctl: rejected: \(url): \(code): \(entry["message"]?.stringValue ?? "")")
            }
        }
        if !rejected.isEmpty { throw .reported(status: ImgctlExit.failure) }
    }
}
