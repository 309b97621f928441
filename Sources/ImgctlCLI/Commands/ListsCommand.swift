import ArgumentParser
import ImgdProtocol

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
        // The deadline column only when some list has one.
        let deadlines = lists.contains { $0["ready_by"]?.intValue != nil }
        var table = TableRenderer(header: [
            "NAME", "STATE", "TOTAL", "CACHED", "ALREADY", "FAILED", "PENDING", "SIZE", "CLAIMED",
        ] + (deadlines ? ["DEADLINE"] : []))
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
            ] + (deadlines ? [Self.deadline(of: list, now: now)] : []))
        }
        for line in table.lines() { session.output(line) }
    }

    /// A list's deadline for the table: "met", "missed", or the time left and the estimate,
    /// "in 12m, eta in 9m", "in 2m, eta in 5m, at risk", "5m ago, late"; "-" without one.
    static func deadline(of list: JSONValue, now: Double) -> String {
        guard let readyBy = list["ready_by"]?.intValue else { return "-" }
        if let met = list["deadline_met"]?.boolValue { return met ? "met" : "missed" }
        let atRisk = list["at_risk"]?.boolValue ?? false
        guard Double(readyBy) / 1000 > now else { return HumanFormat.moment(list["ready_by"], now: now) + ", late" }
        var text = HumanFormat.fromNow(milliseconds: readyBy, now: now)
        if let eta = list["eta"]?.intValue { text += ", eta " + HumanFormat.fromNow(milliseconds: eta, now: now) }
        return atRisk ? text + ", at risk" : text
    }
}
