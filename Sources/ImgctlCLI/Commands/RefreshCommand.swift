import ArgumentParser
import ImgdProtocol

/// `imgctl refresh URL… | --list NAME`: revalidate cached images with their origin now.
struct RefreshCommand: ImgctlSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "refresh",
        abstract: "Revalidate cached images with their origin now, due or not: URLs, or a link list's (--list).",
        discussion: """
            Each cached image is asked for with If-None-Match/If-Modified-Since: a 304 keeps the file and renews its \
            freshness, a new body replaces it. Waits for every answer; URLs not cached are counted, not fetched.
            """)

    @OptionGroup var connection: ConnectionOptions

    @Option(help: ArgumentHelp("The link list's name, as `lists` shows it.", valueName: "name"))
    var list: String?

    @Argument(help: ArgumentHelp("Image URLs.", valueName: "url"))
    var urls: [String] = []

    func validate() throws {
        if !urls.isEmpty, list != nil { throw ValidationError("Give URLs or --list NAME, not both.") }
        if urls.isEmpty, list == nil { throw ValidationError("Give at least one URL, or --list NAME.") }
    }

    func execute(in context: ImgctlContext) throws(ImgctlError) {
        let session = try ControlSession(connection, context: context)
        var arguments: [String: JSONValue] = [:]
        if let list { arguments["list"] = .string(list) } else { arguments["urls"] = .array(urls.map { .string($0) }) }
        let result = try session.call("refresh", arguments)
        guard !session.json else { return }
        let counts = [("revalidated", "revalidated"), ("replaced", "replaced"), ("failed", "failed"), ("not_cached", "not cached")]
            .map { field, words in "\(HumanFormat.count(result[field]?.intValue ?? 0)) \(words)" }
        session.output(counts.joined(separator: ", "))
    }
}
