import ImgdCore
import ImgdNetwork
import ImgdProtocol
import ImgdStore

extension DaemonCommands {
    /// `export`, `import` and `manifest` (Protocol.md, "Carrying the warm set"): each takes its
    /// connection over (``ControlStream``).
    ///
    /// `export` and `manifest` are open to whoever may connect, as `get` is (they give what `get`
    /// would). `import` is for the privileged (root, imgd's user, `admin-group`): it writes
    /// entries under keys the archive names, with bytes no origin was asked for, so a member who
    /// could import could make every other member's `get` of a URL answer with an image of their
    /// choosing; `add` and `get` only ever store what the origin sends.
    func openStream() async throws(ControlError) -> ControlStream {
        switch request.command {
        case "export", "manifest":
            let manifestOnly = request.command == "manifest"
            let rows = try await warmSetRows()
            let bytes = rows.reduce(0) { $0 + $1.entry.bytes }
            let logger = peerLogger, command = request.command
            let export = WarmSetExport(disk: services.disk, rows: rows, manifestOnly: manifestOnly) { written, skipped in
                guard !manifestOnly else { return }
                logger.info("\(command): \(written) entries sent, \(skipped) left the cache during the export and were left out")
            }
            return .sending(reply: ["entries": JSONValue(rows.count), "bytes": JSONValue(bytes)], source: export)
        case "import":
            let replace = try request.bool("replace", default: false)
            try requirePrivilege(for: "import")
            let config = services.config.withLock { $0 }
            let logger = peerLogger
            let sink = WarmSetImport(
                disk: services.disk, memory: services.memory, downloader: services.downloader,
                maxMemberBytes: config.maxBodyBytes, replace: replace, owner: request.peer.uid
            ) { summary in
                let stopped = summary.error.map { "; stopped: \($0)" } ?? ""
                logger.info("import: \(summary.taken) entries taken (\(summary.takenBytes) bytes), \(summary.skipped) already cached, \(summary.refused) refused\(stopped)")
            }
            return .receiving(sink: sink)
        default:
            throw .unknownCommand(request.command)
        }
    }

    /// The entries `export` and `manifest` name, sorted by key: those of the list `list` (the
    /// latest list of that name; its URLs that are cached, under its keys), or every entry with
    /// `"all": true`.
    private func warmSetRows() async throws(ControlError) -> [WarmSetManifestRow] {
        let disk = services.disk
        var entries: [IndexEntry] = []
        if let name = try request.optionalString("list") {
            let spool = services.spool, downloader = services.downloader
            let found = try await fromStateDatabase("reading the cached URLs of list \(EchoedText.cut(name))") { () async throws(SQLiteError) in
                try await spool.cachedURLs(ofList: name, limit: Int(Int32.max))
            }
            guard let (owner, items) = found else { throw .notFound("no list is named \(EchoedText.cut(name))") }
            var keys: [CacheKey] = []
            for item in items {
                guard let url = try? ImageURL(item.url) else { continue }
                keys.append(downloader.request(for: url, chosenKey: item.key, owner: owner).key)
            }
            var start = 0
            while start < keys.count {
                let batch = Array(keys[start..<min(start + 500, keys.count)])
                start += batch.count
                do {
                    entries += try disk.index.entries(for: batch).values
                } catch {
                    throw .other(code: FailureCode.disk.rawValue, message: "reading the cache index failed: \(error)")
                }
            }
        } else if try request.bool("all", default: false) {
            var after: CacheKey?
            while true {
                let page: [IndexEntry]
                do {
                    page = try disk.index.entries(after: after, limit: 1_000)
                } catch {
                    throw .other(code: FailureCode.disk.rawValue, message: "reading the cache index failed: \(error)")
                }
                entries += page
                guard page.count == 1_000, let last = page.last else { break }
                after = last.key
            }
        } else {
            throw .invalidArgument(field: "list", reason: "give \"list\": NAME or \"all\": true")
        }
        return entries.map(WarmSetManifestRow.init(entry:)).sorted { $0.memberName < $1.memberName }
    }
}
