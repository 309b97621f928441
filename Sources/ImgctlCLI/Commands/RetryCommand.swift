import ArgumentParser
import ImgdProtocol

/// `imgctl retry [URL | --list NAME]`: queue failed downloads again.
struct RetryCommand: ImgctlSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "retry",
        abstract: "Queue failed downloads again: URL, a link list's (--list), or every remembered failure (neither).",
        discussion: """
            A list's URLs that failed url_expired (a signed URL past its expiry) are not queued again: \
            the origin would refuse them. Re-sign them (the list's report lists them under "expired") \
            and drop them in a new list.
            """)

    @OptionGroup var connection: ConnectionOptions

    @Option(help: ArgumentHelp("The link list's name, as `lists` shows it.", valueName: "name"))
    var list: String?

    @Argument(help: ArgumentHelp("The image URL.", valueName: "url"))
    var url: String?

    func validate() throws {
        if url != nil, list != nil { throw ValidationError("Give a URL or --list NAME, not both.") }
    }

    func execute(in context: ImgctlContext) throws(ImgctlError) {
        let session = try ControlSession(connection, context: context)
        var arguments: [String: JSONValue] = [:]
        if let url { arguments["url"] = .string(url) }
        if let list { arguments["list"] = .string(list) }
        let result = try session.call("retry", arguments)
        guard !session.json else { return }
        let requeued = result["requeued"]?.intValue ?? 0
        session.output("requeued \(HumanFormat.count(requeued)) URL\(requeued == 1 ? "" : "s")")
        if let expired = result["expired"]?.intValue, expired > 0 {
            session.warn(
                "imgctl: \(HumanFormat.count(expired)) expired URL\(expired == 1 ? "" : "s") (url_expired) not requeued: "
                    + "retrying cannot help; re-sign them (the list's report lists them under \"expired\") and drop them again")
        }
    }
}
