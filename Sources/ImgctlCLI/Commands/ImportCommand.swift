import ArgumentParser
import ImgdBase
import ImgdClient
import ImgdProtocol

#if canImport(Glibc)
import Glibc
#endif

/// `imgctl import [FILE]`: sends an `export`'s tar stream to imgd, which verifies and publishes
/// each entry (Protocol.md, "Carrying the warm set").
struct ImportCommand: ImgctlSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Import an export's tar stream (FILE, or stdin) into the cache.",
        discussion: """
            imgd checks every member against the manifest (its SHA-256 and size) and as an \
            image, as it checks a download, before publishing it under the disk cap (evicting \
            as for a download; once the cache is full the rest are refused). An entry already \
            cached with the same digest is skipped; one cached with another digest is refused \
            unless --replace. Members the manifest does not name, links, devices and folders \
            are refused; nothing is ever extracted to a path. Only root, imgd's user and \
            members of admin-group may import. Prints a summary and each refusal; exits 1 if \
            anything was refused or the stream was malformed or cut.
            """)

    @OptionGroup var connection: ConnectionOptions

    @Flag(help: "Replace entries cached here with another digest.")
    var replace = false

    @Argument(help: ArgumentHelp("The tar stream (- or none: stdin).", valueName: "file"), completion: .file())
    var file: String?

    func execute(in context: ImgctlContext) throws(ImgctlError) {
        let path = file ?? "-"
        let input = path == "-" ? STDIN_FILENO : open(path, O_RDONLY | O_CLOEXEC)
        guard input >= 0 else { throw .local("cannot read \(path): \(ControlClient.describe(errno))") }
        defer { if input != STDIN_FILENO { close(input) } }
        let session = try ControlSession(connection, context: context)
        let client = session.client
        var arguments: [String: JSONValue] = [:]
        if replace { arguments["replace"] = true }
        let id = try client.send("import", arguments)
        var chunk = [UInt8](repeating: 0, count: 256 * 1024)
        copying: while true {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(input, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw .local("cannot read \(path): \(ControlClient.describe(errno))")
            }
            if count == 0 { break }
            let written = chunk.withUnsafeBytes { buffer in
                Result { () throws(ImgdClientError) in try client.connection.writeRaw(UnsafeRawBufferPointer(rebasing: buffer[0..<count])) }
            }
            do throws(ImgdClientError) {
                try written.get()
            } catch .connectionLost {
                break copying  // imgd stopped reading (a refusal, a malformed stream): its reply says why
            } catch {
                throw ImgctlError(error)
            }
        }
        client.connection.finishWriting()
        let reply = try client.awaitReply(id: id)
        if session.json { context.standardOutput.line(reply.raw) }
        if let error = reply.error { throw .daemon(code: error.code, message: error.message) }
        let result = reply.result
        let refused = result["refused"]?.intValue ?? 0
        let failure = result["error"]?.stringValue
        if !session.json {
            for refusal in result["refusals"]?.arrayValue ?? [] {
                let key = refusal["key"]?.stringValue ?? "?"
                let url = refusal["url"]?.stringValue.map { " \(HumanFormat.text($0))" } ?? ""
                context.standardError.line("refused \(HumanFormat.text(key))\(url): \(HumanFormat.text(refusal["reason"]?.stringValue ?? ""))")
            }
            let taken = result["taken"]?.intValue ?? 0, skipped = result["skipped"]?.intValue ?? 0
            let bytes = result["taken_bytes"]?.intValue ?? 0
            context.standardOutput.line("taken \(taken) (\(bytes) bytes), skipped \(skipped) (already cached), refused \(refused)")
            if let failure { context.standardError.line("imgctl: import stopped: \(HumanFormat.text(failure))") }
        }
        if refused > 0 || failure != nil { throw .reported(status: ImgctlExit.failure) }
    }
}
