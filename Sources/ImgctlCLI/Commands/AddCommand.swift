import ArgumentParser
import ImgdBase
import ImgdProtocol

/// `imgctl add URL…`: queue URLs for download without waiting for them.
struct AddCommand: ImgctlSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "add",
        abstract: "Queue URLs for download (returns at once; see `get` to wait for one).",
        discussion: "Exit status 1 when the daemon rejects any URL (each is listed on stderr).")

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
    }

    func execute(in context: ImgctlContext) throws(ImgctlError) {
        let session = try ControlSession(connection, context: context)
        var arguments: [String: JSONValue] = ["urls": .array(urls.map(JSONValue.string))]
        if priority != .normal { arguments["priority"] = .string(priority.rawValue) }
        if let pin { arguments["pin"] = .string(pin) }
        let result = try session.call("add", arguments)
        let rejected = result["rejected"]?.arrayValue ?? []
        if !session.json {
            let accepted = result["accepted"]?.intValue ?? 0
            session.output("queued \(HumanFormat.count(accepted)) URL\(accepted == 1 ? "" : "s")")
            for entry in rejected {
                let url = entry["url"]?.stringValue ?? "?"
                let code = entry["code"]?.stringValue ?? "?"
                session.warn("imgctl: rejected: \(url): \(code): \(entry["message"]?.stringValue ?? "")")
            }
        }
        if !rejected.isEmpty { throw .reported(status: ImgctlExit.failure) }
    }
}
