import ArgumentParser

/// `imgctl failed [--list NAME]`: the downloads that failed recently, or a list's failures.
struct FailedCommand: ImgctlSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "failed",
        abstract: "Show the failures of the last 10 minutes, or of one link list (--list).")

    @OptionGroup var connection: ConnectionOptions

    @Option(help: ArgumentHelp("The link list's name, as `lists` shows it.", valueName: "name"))
    var list: String?

    func execute(in context: ImgctlContext) throws(ImgctlError) {
        let session = try ControlSession(connection, context: context)
        let result = try session.call("failed", list.map { ["list": .string($0)] } ?? [:])
        guard !session.json else { return }
        let failures = result["failures"]?.array ?? []
        guard !failures.isEmpty else {
            session.output("no failures")
            return
        }
        var table = TableRenderer(header: ["CODE", "WHERE", "URL", "MESSAGE"])
        for failure in failures {
            var place = failure["list"]?.string ?? "-"
            if let line = failure["line"]?.int { place += ":\(line)" }
            table.append([
                failure["code"]?.string ?? "?", place, failure["url"]?.string ?? "?", failure["message"]?.string ?? "",
            ])
        }
        for line in table.lines() { session.output(line) }
    }
}
