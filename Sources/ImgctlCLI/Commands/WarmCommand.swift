import ArgumentParser
import ImgdProtocol

/// `imgctl warm FILE…`: hand link lists to the daemon through its spool.
struct WarmCommand: ImgctlSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "warm",
        abstract: "Submit link lists: copy each FILE into the daemon's spool (- reads stdin).",
        discussion: """
            Each file is written into the spool folder that `status` names, as .NAME.tmp, then \
            renamed to NAME, so the daemon never reads a partial list; when NAME is taken (in the \
            spool, its done/ or failed/ folders, or among the daemon's recent lists) a number is \
            added before the extension (links-1.txt). The spool must be reachable from here (the \
            same machine). Formats by extension: .json, .plist, .xml (a sitemap, a sitemap index or \
            a plist; .xml.gz when compressed), anything else text; a text list \
            may start with `# pin: 24h`.

            With --wait, shows each list's progress (a bar per list on a terminal, a line every \
            few seconds otherwise, on stderr) until it finishes, then prints a summary per list \
            and the first failures of a failed list. Exit status 1 when any list ends failed or \
            cancelled, or a file could not be submitted.

            --json prints a line per file submitted, {"file", "name", "path"}; with --wait also \
            each list's final entry from `lists` (or its report).
            """)

    @OptionGroup var connection: ConnectionOptions

    @Flag(help: "Wait until every list has finished, showing progress.")
    var wait = false

    @Argument(
        help: ArgumentHelp("Link-list files (one URL a line, .json, .plist, or an .xml sitemap).", valueName: "file"),
        completion: .file())
    var files: [String]

    /// How many failures of a failed list the summary shows.
    static let failuresShown = 10

    func validate() throws {
        guard !files.isEmpty else { throw ValidationError("Give at least one link-list file.") }
        if files.filter({ $0 == "-" }).count > 1 { throw ValidationError("stdin (-) can be given once.") }
    }

    func execute(in context: ImgctlContext) throws(ImgctlError) {
        let session = try ControlSession(connection, context: context)
        let status = try session.call("status", echo: false)
        guard let spool = status["spool"]?.stringValue, spool.hasPrefix("/") else {
            throw .badReply("status names no spool folder (\"spool\"): is this imgd older than imgctl?")
        }
        if wait {
            // Before the first list is dropped, so its ending cannot come before we listen.
            try session.call("subscribe", ["events": .array([.string("list_done")])], echo: false)
        }
        var writer = SpoolWriter(spool: spool)
        writer.beforeRename = context.beforeSpoolRename
        for entry in try session.call("lists", echo: false)["lists"]?.arrayValue ?? [] {
            if let name = entry["name"]?.stringValue { writer.knownNames.insert(name) }
        }
        var submitted: [String] = []
        var anyFailed = false
        for file in files {
            do throws(ImgctlError) {
                let name = try writer.submit(file)
                writer.knownNames.insert(name)
                submitted.append(name)
                if session.json {
                    session.output(
                        JSONValue.object([
                            "file": .string(file), "name": .string(name), "path": .string(spool + "/" + name),
                        ]).jsonText)
                } else {
                    session.output("submitted \(HumanFormat.text(file)) as \(HumanFormat.text(name))")
                }
            } catch {
                anyFailed = true
                if let message = error.message { session.warn(message) }
            }
        }
        if wait, !submitted.isEmpty {
            let lists = try ListWaiter(session: session, spool: spool).wait(for: submitted)
            for list in lists {
                if session.json {
                    session.output(list.raw.jsonText)
                } else {
                    session.output(Self.summary(list))
                    if list.endedBadly { try showFailures(of: list, session: session) }
                }
                if list.endedBadly { anyFailed = true }
            }
        }
        if anyFailed { throw .reported(status: ImgctlExit.failure) }
    }

    /// `links.txt: done: 100 URLs: 95 cached, 5 already cached, 0 failed (12 MiB)`.
    static func summary(_ list: ListProgress) -> String {
        var text = "\(HumanFormat.text(list.name)): \(HumanFormat.text(list.state ?? "?")): "
        if let total = list.total { text += "\(HumanFormat.count(total)) URL\(total == 1 ? "" : "s"): " }
        text +=
            "\(HumanFormat.count(list.cached)) cached, \(HumanFormat.count(list.alreadyCached)) already cached, "
            + "\(HumanFormat.count(list.failed)) failed"
        if let bytes = list.bytes { text += " (\(HumanFormat.size(bytes)))" }
        return text
    }

    /// The first failures of a list that ended badly, on stderr. Best effort: a daemon that
    /// no longer knows the list just shows none.
    private func showFailures(of list: ListProgress, session: ControlSession) throws(ImgctlError) {
        let failures: [JSONValue]
        do throws(ImgctlError) {
            failures = try session.call("failed", ["list": .string(list.name)], echo: false)["failures"]?.arrayValue ?? []
        } catch .daemon {
            return
        }
        for failure in failures.prefix(Self.failuresShown) {
            var place = HumanFormat.text(list.name)
            if let line = failure["line"]?.intValue { place += ":\(line)" }
            let url = HumanFormat.text(failure["url"]?.stringValue ?? "?")
            let code = HumanFormat.text(failure["code"]?.stringValue ?? "?")
            session.warn("imgctl: \(place): \(url): \(code): \(HumanFormat.text(failure["message"]?.stringValue ?? ""))")
        }
        if failures.count > Self.failuresShown {
            let more = failures.count - Self.failuresShown
            session.warn("imgctl: \(HumanFormat.text(list.name)): … and \(more) more (imgctl failed --list \(HumanFormat.text(list.name)))")
        }
    }
}
