import ArgumentParser
import ImgdBase
import ImgdProtocol

#if canImport(Glibc)
import Glibc
#endif

/// `imgctl manifest --list NAME | --all [--compare FILE]`: what `export` would carry, as JSON
/// lines sorted by key; with `--compare`, how this daemon's entries differ from another's.
struct ManifestCommand: ImgctlSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "manifest",
        abstract: "Print the manifest export would write (JSON lines sorted by key), or compare it with another's.",
        discussion: """
            Each line is one entry: url, key, sha256, format, width, height, bytes, fetched_at \
            and the freshness and validators imgd keeps. With --compare FILE (a manifest saved \
            from another machine, or an export's imgd-manifest.jsonl), prints one line per \
            difference, by key: "missing-here KEY URL" (in FILE, not cached here), \
            "missing-there KEY URL" (cached here, not in FILE), "differs KEY URL" (both, with \
            another sha256); exits 1 when there is any, 0 when the two agree.
            """)

    @OptionGroup var connection: ConnectionOptions

    @Option(help: ArgumentHelp("The cached entries of this list.", valueName: "name"))
    var list: String?

    @Flag(help: "Every cached entry.")
    var all = false

    @Option(help: ArgumentHelp("Compare with this manifest (JSON lines) and print the differences.", valueName: "file"), completion: .file())
    var compare: String?

    func validate() throws {
        if (list == nil) == !all { throw ValidationError("Give exactly one of --list NAME and --all.") }
    }

    func execute(in context: ImgctlContext) throws(ImgctlError) {
        let session = try ControlSession(connection, context: context)
        _ = try session.call("manifest", ExportCommand.selection(list: list, all: all), echo: false)
        var text: [UInt8] = []
        try ExportCommand.copyRaw(session.client) { text += $0 }
        guard let compare else {
            context.standardOutput.write(text)
            return
        }
        let here = try Self.rows(text, source: "imgd's manifest")
        let there = try Self.rows(try Self.read(compare), source: compare)
        var differences = 0
        for key in Set(here.keys).union(there.keys).sorted() {
            switch (here[key], there[key]) {
            case (nil, let theirs?):
                context.standardOutput.line("missing-here \(key) \(theirs.url)")
            case (let ours?, nil):
                context.standardOutput.line("missing-there \(key) \(ours.url)")
            case (let ours?, let theirs?) where ours.sha256 != theirs.sha256:
                context.standardOutput.line("differs \(key) \(ours.url)")
            default:
                continue
            }
            differences += 1
        }
        if differences > 0 { throw .reported(status: ImgctlExit.failure) }
    }

    /// A manifest's rows by key.
    static func rows(_ text: [UInt8], source: String) throws(ImgctlError) -> [String: (url: String, sha256: String)] {
        var rows: [String: (url: String, sha256: String)] = [:]
        var number = 0
        for line in text.split(separator: UInt8(ascii: "\n")) {
            number += 1
            guard let value = try? JSONValue(parsing: line), let key = value["key"]?.stringValue,
                let sha256 = value["sha256"]?.stringValue
            else {
                throw .local("\(source) line \(number) is not a manifest row (a JSON object with \"key\" and \"sha256\")")
            }
            rows[key] = (value["url"]?.stringValue ?? "", sha256)
        }
        return rows
    }

    static func read(_ path: String) throws(ImgctlError) -> [UInt8] {
        let descriptor = path == "-" ? STDIN_FILENO : open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw .local("cannot read \(path): \(ControlClient.describe(errno))") }
        defer { if descriptor != STDIN_FILENO { close(descriptor) } }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw .local("cannot read \(path): \(ControlClient.describe(errno))")
            }
            if count == 0 { return bytes }
            bytes += chunk[0..<count]
        }
    }
}
