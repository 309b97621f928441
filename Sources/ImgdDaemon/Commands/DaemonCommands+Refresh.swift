import ImgdCore
import ImgdNetwork
import ImgdProtocol
import ImgdStore

extension DaemonCommands {
    /// `refresh`: revalidates the cached entries of `urls`, or of the list `list`, now, due or
    /// not, and answers once every one has its outcome: `revalidated` (304, the file kept),
    /// `replaced` (a new body), `failed` (the entry is still served), `not_cached` (nothing
    /// done). Its outcomes are published as any revalidation's are.
    func refresh() async throws(ControlError) -> JSONValue {
        let config = services.config.withLock { $0 }
        let downloader = services.downloader
        var requests: [ImageRequest] = []
        if let name = try request.optionalString("list") {
            let spool = services.spool, limit = config.maxQueued
            let found = try await fromStateDatabase("reading the cached URLs of list \(EchoedText.cut(name))") { () async throws(SQLiteError) in
                try await spool.cachedURLs(ofList: name, limit: limit)
            }
            guard let (owner, items) = found else {
                throw .notFound("no list is named \(EchoedText.cut(name))")
            }
            for item in items {
                guard let url = try? ImageURL(item.url) else { continue }
                requests.append(downloader.request(for: url, chosenKey: item.key, owner: owner))
            }
        } else {
            let texts = try request.strings("urls")
            guard !texts.isEmpty else { throw .invalidArgument(field: "urls", reason: "must not be empty (or give list)") }
            guard texts.count <= config.maxAddURLs else {
                throw .invalidArgument(field: "urls", reason: "\(texts.count) URLs, over the limit of \(config.maxAddURLs) (max-add-urls)")
            }
            for text in texts {
                guard let url = try? ImageURL(text) else { throw .invalidArgument(field: "urls", reason: "\(EchoedText.cut(text)) is not an http(s) URL") }
                requests.append(downloader.request(for: url))
            }
        }
        let tally = RefreshTally()
        let memory = services.memory, outcomes = services.outcomes
        // Forced revalidations are held requests like an add's: bounded by max-queued (and a
        // member's share), duplicates merged.
        let limit = heldLimit
        let taken = downloader.revalidate(requests, priority: .onDemand, limit: limit, caller: request.peer.uid) { url, result in
            if case .success(let image) = result { memory.remove(image.key) }
            outcomes.revalidated(url, result)
            tally.record(result)
        }
        guard let taken else {
            throw queueFull(limit, adding: requests.count, bytes: requests.reduce(0) { $0 + $1.url.normalized.utf8.count })
        }
        let missing = taken.missing
        let counts = await tally.wait(for: taken.asked)
        logChange("refresh: \(requests.count) URLs, \(counts.revalidated) not modified, \(counts.replaced) replaced, \(counts.failed) failed")
        return [
            "revalidated": JSONValue(counts.revalidated), "replaced": JSONValue(counts.replaced),
            "failed": JSONValue(counts.failed), "not_cached": JSONValue(missing.count),
        ]
    }
}
