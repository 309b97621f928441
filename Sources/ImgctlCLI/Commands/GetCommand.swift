import ArgumentParser
import ImgdBase
import ImgdProtocol

#if canImport(Glibc)
import Glibc
#endif

/// `imgctl get URL`: the cached file's path, fetching the image first if needed; or, with `-o`,
/// the image's bytes.
struct GetCommand: ImgctlSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "get",
        abstract: "Print the path of URL's cached image (fetching it first unless --no-fetch), or write its bytes with -o.",
        discussion: """
            Waits for the download when the image is not cached. With --no-fetch, a miss is the \
            error not_found (exit status 1). With -o FILE the bytes are written to FILE \
            atomically (a temporary file beside it, then a rename) after their size and SHA-256 \
            are checked against the reply; -o - writes them to stdout. The bytes come through a \
            read-only descriptor imgd passes with the reply (so a user who may use the socket \
            but not read the cache folder gets them too), or, from an imgd without the "fd" \
            feature, in the reply itself. With --json and -o, the reply line is printed without \
            its "data" field.
            """)

    @OptionGroup var connection: ConnectionOptions

    @Flag(inversion: .prefixedNo, help: "Download the image when it is not cached.")
    var fetch = true

    @Option(
        name: [.customShort("o"), .customLong("output")],
        help: ArgumentHelp(
            "Write the image's bytes to this file (- for stdout) instead of printing its path.", valueName: "file"),
        completion: .file())
    var output: String?

    @Option(
        name: .customLong("mirror"),
        help: ArgumentHelp(
            "Another URL of the same image, asked when url fails (no answer, 5xx, 404); repeatable, at most 8. The image keeps url's key.",
            valueName: "url"))
    var mirrors: [String] = []

    @Argument(help: ArgumentHelp("The image URL.", valueName: "url"))
    var url: String

    func validate() throws {
        if output == "-", connection.json {
            throw ValidationError("--json cannot be used with -o -: stdout carries the image.")
        }
    }

    func execute(in context: ImgctlContext) throws(ImgctlError) {
        let session = try ControlSession(connection, context: context)
        var arguments: [String: JSONValue] = ["url": .string(url)]
        if !fetch { arguments["fetch"] = .bool(false) }
        if !mirrors.isEmpty { arguments["mirrors"] = JSONValue(mirrors) }
        guard let output else {
            let result = try session.call("get", arguments)
            if session.json { return }
            guard let path = result["path"]?.stringValue else {
                throw .badReply("get: no \"path\" in \(result.jsonText)")
            }
            session.output(path)
            return
        }
        // The file through a descriptor: no copy of the bytes in the daemon or in this
        // process, and no need to read the cache folder. An imgd with the fd feature passes one
        // and ignores `data`; one without ignores `fd` and sends the bytes: one request for both.
        arguments["fd"] = .bool(true)
        arguments["data"] = .bool(true)
        var reply = try session.reply("get", arguments, echo: false)
        if let descriptor = reply.descriptor {
            if session.json { session.output(reply.raw) }
            try Self.write(descriptor.rawValue, result: reply.result, to: output, context: context)
            return
        }
        if reply.result["data"] == nil {
            // Passed, but this process had no descriptor free to take it: the bytes, then.
            arguments["fd"] = nil
            reply = try session.reply("get", arguments, echo: false)
        }
        let bytes = try Self.decodedData(reply.result)
        if session.json, case .object(var line) = (try? JSONValue(parsing: Array(reply.raw.utf8))),
            case .object(var result) = line["result"]
        {
            // The base64 bytes would swamp the line; the rest of it is what a script wants.
            result["data"] = nil
            line["result"] = .object(result)
            session.output(JSONValue.object(line).jsonText)
        }
        if output == "-" {
            context.standardOutput.write(bytes)
        } else {
            try Self.writeAtomically(bytes, to: output)
        }
    }

    /// The image's bytes from a `get` result with `data: true`, checked against its `bytes`
    /// and `sha256` when the result has them.
    static func decodedData(_ result: JSONValue) throws(ImgctlError) -> [UInt8] {
        guard let text = result["data"]?.stringValue else {
            throw .badReply("get: no \"data\" in the reply (does this imgd support the data feature?)")
        }
        guard let bytes = Base64.decode(text) else {
            throw .badReply("get: \"data\" is not base64")
        }
        if let expected = result["bytes"]?.intValue, expected != bytes.count {
            throw .badReply("get: \"data\" holds \(bytes.count) bytes, the reply says \(expected)")
        }
        if let expected = result["sha256"]?.stringValue, ReplyDigest.hex(of: bytes) != expected.lowercased() {
            throw .badReply("get: the SHA-256 of \"data\" is not the reply's \(expected)")
        }
        return bytes
    }

    /// Writes the file `descriptor` reads, checked against `result`, to `output` (a path, or
    /// `-` for stdout).
    static func write(_ descriptor: Int32, result: JSONValue, to output: String, context: ImgctlContext) throws(ImgctlError) {
        try DescriptorCopy.verified(descriptor, result: result) { (bytes) throws(ImgctlError) in
            if output == "-" {
                context.standardOutput.write(Array(bytes))
                return
            }
            try writeAtomically(to: output) { target in DescriptorCopy.copy(descriptor, size: bytes.count, into: target) }
        }
    }

    /// Writes `bytes` to a temporary file beside `path`, flushes it, and renames it over
    /// `path`: a reader of `path` sees the old file or the whole new one, never a part.
    static func writeAtomically(_ bytes: [UInt8], to path: String) throws(ImgctlError) {
        try writeAtomically(to: path) { descriptor in
            do throws(WriteError) {
                try writeAll(descriptor, bytes)
                return 0
            } catch {
                return error.errno
            }
        }
    }

    /// Has `fill` write a temporary file beside `path` (returning 0, or the errno that stopped
    /// it), flushes it, and renames it over `path`.
    static func writeAtomically(to path: String, fill: (Int32) -> Int32) throws(ImgctlError) {
        let slash = path.lastIndex(of: "/")
        let directory = slash.map { String(path[..<$0]) } ?? "."
        let name = slash.map { String(path[path.index(after: $0)...]) } ?? path
        let temporary = (directory.isEmpty ? "" : directory + "/") + ".\(name).imgctl-\(getpid()).tmp"
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o666)
        guard descriptor >= 0 else {
            throw .local("cannot write \(path): \(ControlClient.describe(errno))")
        }
        var failure = fill(descriptor)
        if failure == 0, fsync(descriptor) != 0 { failure = errno }
        close(descriptor)
        if failure == 0, rename(temporary, path) != 0 { failure = errno }
        if failure != 0 {
            unlink(temporary)
            throw .local("cannot write \(path): \(ControlClient.describe(failure))")
        }
    }
}
