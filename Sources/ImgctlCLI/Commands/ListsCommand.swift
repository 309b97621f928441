import ArgumentParser

/// `imgctl lists`: the link lists the daemon is working on or finished recently.
struct ListsCommand: ImgctlSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "lists",
        abstract: "Show the link lists in progress and the last 100 finished, most recent first.")

    @OptionGroup var connection: ConnectionOptions

    func execute(in context: ImgctlContext) throws(ImgctlError) {
        let session = try ControlSession(connection, context: context)
        let result = try session.call("lists")
        guard !session.json else { return }
        let lists = result["lists"]?.arrayValue ?? []
        guard !lists.isEmpty else {
            session.output("no link lists")
            return
        }
        let now = context.now()
        var table = TableRenderer(header: [
            "NAME", "STATE", "TOTAL", "CACHED", "ALREADY", "FAILED", "PENDING", "SIZE", "CLAIMED",
        ])
        for list in lists {
            let count = { (key: String) in list[key]?.intValue.map(HumanFormat.count) ?? "-" }
            // A list waiting for its turn shows its place: "waiting #2"; one held to a calendar
            // window, the window: "held (night)".
            let windows = (list["window"]?.arrayValue ?? []).compactMap(\.stringValue)
            let state = (list["state"]?.stringValue ?? "?") + (list["position"]?.intValue.map { " #\($0)" } ?? "")
                + (windows.isEmpty ? "" : " (\(windows.joined(separator: ",")))")
            table.append([
                list["name"]?.stringValue ?? "?", state, count("total"), count("cached"),
                count("already_cached"), count("failed"), count("pending"),
                list["bytes"]?.intValue.map(HumanFormat.size) ?? "-", HumanFormat.moment(list["claimed_at"], now: now),
            ])
        }
        for line in table.lines() { session.output(line) }
    }
}
