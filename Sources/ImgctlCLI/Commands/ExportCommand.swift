import ArgumentParser
import ImgdBase
import ImgdClient
import ImgdProtocol

/// `imgctl export --list NAME | --all > warm.tar`: the cached entries as a tar stream, for
/// `imgctl import` on another machine (Protocol.md, "Carrying the warm set").
struct ExportCommand: ImgctlSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract: "Write cached entries (a manifest and their files) as a tar stream to stdout.",
        discussion: """
            The stream is POSIX ustar (GNU tar -tf lists it): first imgd-manifest.jsonl, one \
            JSON line per entry (url, key, sha256, format, width, height, bytes, fetched_at and \
            the freshness and validators imgd keeps), then one member per entry named by its \
            key. --list NAME exports the cached URLs of the latest list of that name, --all \
            every entry. An entry evicted while the export runs is left out (the importer \
            reports it as not in the archive). Exits 1 when the stream ends early (no \
            end-of-archive blocks): the archive is then incomplete. A summary goes to stderr.
            """)

    @OptionGroup var connection: ConnectionOptions

    @Option(help: ArgumentHelp("Export the cached entries of this list.", valueName: "name"))
    var list: String?

    @Flag(help: "Export every cached entry.")
    var all = false

    func validate() throws {
        if (list == nil) == !all { throw ValidationError("Give exactly one of --list NAME and --all.") }
    }

    /// The request's arguments, shared with `manifest`.
    static func selection(list: String?, all: Bool) -> [String: JSONValue] {
        if let list { return ["list": .string(list)] }
        return ["all": true]
    }

    func execute(in context: ImgctlContext) throws(ImgctlError) {
        let session = try ControlSession(connection, context: context)
        let result = try session.call("export", Self.selection(list: list, all: all), echo: false)
        var total = 0
        var tail: [UInt8] = []
        try Self.copyRaw(session.client) { bytes in
            total += bytes.count
            tail = Array((tail + bytes).suffix(1024))
            context.standardOutput.write(bytes)
        }
        guard total >= 1024, total % 512 == 0, tail.allSatisfy({ $0 == 0 }) else {
            throw .local("the export stream ended early after \(total) bytes (imgd's journal says why): the archive is incomplete")
        }
        let entries = result["entries"]?.intValue ?? 0
        let bytes = result["bytes"]?.intValue ?? 0
        context.standardError.line("imgctl: exported \(entries) entries (\(bytes) bytes of images, \(total) bytes of tar)")
    }

    /// Reads the raw bytes after a stream command's reply until the daemon closes.
    static func copyRaw(_ client: ControlClient, _ sink: ([UInt8]) throws(ImgctlError) -> Void) throws(ImgctlError) {
        var chunk = [UInt8](repeating: 0, count: 256 * 1024)
        while true {
            let read = chunk.withUnsafeMutableBytes { buffer in
                Result { () throws(ImgdClientError) in try client.connection.readRaw(into: buffer) }
            }
            let count = try ControlClient.mapped { () throws(ImgdClientError) in try read.get() }
            if count == 0 { return }
            try sink(Array(chunk[0..<count]))
        }
    }
}
