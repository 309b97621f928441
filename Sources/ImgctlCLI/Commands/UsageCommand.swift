import ArgumentParser

/// `imgctl usage`: the disk tier per user (`status.users`): what is charged to each uid, its
/// pinned bytes and its quota.
struct UsageCommand: ImgctlSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "usage",
        abstract: "Show the disk tier's bytes and entries charged to each user, with pinned bytes and quota.",
        discussion: """
            An entry is charged to the uid that first caused it to be cached (the list's owner, \
            or the add/get caller); entries with no owner (from before quotas, imgd's ready \
            lists, HTTP clients over TCP) are shown as (unowned). With --json, prints the status \
            reply; its users field holds the rows.
            """)

    @OptionGroup var connection: ConnectionOptions

    func execute(in context: ImgctlContext) throws(ImgctlError) {
        let session = try ControlSession(connection, context: context)
        let result = try session.call("status")
        guard !session.json else { return }
        let users = result["users"]?.arrayValue ?? []
        guard !users.isEmpty else {
            session.output("no entries charged to anyone")
            return
        }
        var table = TableRenderer(header: ["UID", "USER", "ENTRIES", "SIZE", "PINNED", "QUOTA", "USED"])
        for user in users {
            let uid = user["uid"]?.intValue
            let bytes = user["bytes"]?.intValue ?? 0
            let limit = user["limit"]?.intValue
            let used = limit.map { $0 > 0 ? "\(bytes * 100 / $0)%" : "-" } ?? "-"
            table.append([
                uid.map { "\($0)" } ?? "-", uid == nil ? "(unowned)" : (user["name"]?.stringValue ?? "-"),
                user["entries"]?.intValue.map(HumanFormat.count) ?? "-", HumanFormat.size(bytes),
                user["pinned_bytes"]?.intValue.map(HumanFormat.size) ?? "-",
                limit.map(HumanFormat.size) ?? (uid == nil ? "-" : "none"), used,
            ])
        }
        for line in table.lines() { session.output(line) }
    }
}
