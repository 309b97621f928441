import ArgumentParser
import ImgdProtocol

/// `imgctl evict URL…`: drop images from both tiers.
struct EvictCommand: ImgctlSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "evict", abstract: "Remove the images of these URLs from the memory tier and the disk cache.")

    @OptionGroup var connection: ConnectionOptions

    @Argument(help: ArgumentHelp("The image URLs.", valueName: "url"))
    var urls: [String]

    func validate() throws {
        guard !urls.isEmpty else { throw ValidationError("Give at least one URL.") }
    }

    func execute(in context: ImgctlContext) throws(ImgctlError) {
        let session = try ControlSession(connection, context: context)
        let result = try session.call("evict", ["urls": .array(urls.map(JSONValue.string))])
        guard !session.json else { return }
        let evicted = result["evicted"]?.intValue ?? 0
        session.output("evicted \(HumanFormat.count(evicted)) entr\(evicted == 1 ? "y" : "ies")")
    }
}
