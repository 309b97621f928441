import ArgumentParser
import ImgdProtocol

/// `imgctl failed [--list NAME]`: the downloads that failed recently, or a list's failures.
/// The daemon answers in pages (at most 1,000 failures a reply); this follows each page's
/// `next` until the last, printing as it goes, so the output is whole and memory stays flat.
struct FailedCommand: ImgctlSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "failed",
        abstract: "Show the failures of the last 10 minutes, or of one link list (--list).")

    @OptionGroup var connection: ConnectionOptions

    @Option(help: ArgumentHelp("The link list's name, as `lists` shows it.", valueName: "name"))
    var list: String?

    func execute(in context: ImgctlContext) throws(ImgctlError) {
        let session = try ControlSession(connection, context: context)
        var arguments: [String: JSONValue] = list.map { ["list": .string($0)] } ?? [:]
        var shown = 0
        while true {
            // With --json each page's reply line is printed as it comes.
            let result = try session.call("failed", arguments)
            let failures = result["failures"]?.arrayValue ?? []
            if !session.json, !failures.isEmpty {
                // One table per page: columns are sized by the page, the header printed once.
                var table = TableRenderer(header: ["CODE", "WHERE", "URL", "MESSAGE"])
                for failure in failures {
                    var place = failure["list"]?.stringValue ?? "-"
                    if let line = failure["line"]?.intValue { place += ":\(line)" }
                    table.append([
                        failure["code"]?.stringValue ?? "?", place, failure["url"]?.stringValue ?? "?", failure["message"]?.stringValue ?? "",
                    ])
                }
                for line in table.lines().dropFirst(shown == 0 ? 0 : 1) { session.output(line) }
            }
            shown += failures.count
            guard let next = result["next"]?.stringValue else { break }
            arguments["after"] = .string(next)
        }
        if !session.json, shown == 0 { session.output("no failures") }
    }
}
