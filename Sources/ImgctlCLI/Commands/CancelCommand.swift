import ArgumentParser
import ImgdProtocol

/// `imgctl cancel URL | --list NAME`: stop a download or a whole link list.
struct CancelCommand: ImgctlSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "cancel",
        abstract: "Cancel the download of URL, or every pending URL of a link list (--list).",
        discussion: "A cancelled list is reported like a failed one. An unknown list is the error not_found.")

    @OptionGroup var connection: ConnectionOptions

    @Option(help: ArgumentHelp("The link list's name, as `lists` shows it.", valueName: "name"))
    var list: String?

    @Argument(help: ArgumentHelp("The image URL.", valueName: "url"))
    var url: String?

    func validate() throws {
        guard (url == nil) != (list == nil) else {
            throw ValidationError("Give either a URL or --list NAME.")
        }
    }

    func execute(in context: ImgctlContext) throws(ImgctlError) {
        let session = try ControlSession(connection, context: context)
        let arguments: [String: JSONValue] = url.map { ["url": .string($0)] } ?? ["list": .string(list ?? "")]
        let result = try session.call("cancel", arguments)
        guard !session.json else { return }
        let cancelled = result["cancelled"]?.intValue ?? 0
        session.output("cancelled \(HumanFormat.count(cancelled)) download\(cancelled == 1 ? "" : "s")")
    }
}
