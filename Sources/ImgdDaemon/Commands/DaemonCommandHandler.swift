import Foundation
import ImgdCore
import ImgdNetwork
import ImgdProtocol
import ImgdStore
import Logging

/// The daemon's commands (Protocol.md, *Commands*), run for the control server. Commands that
/// change state are logged with the peer that sent them.
final class DaemonCommandHandler: ControlCommandHandler {
    /// The services, attached once they exist (the server is built before them).
    private let services = Locked<DaemonServices?>(nil)

    func attach(_ services: DaemonServices) {
        self.services.withLock { $0 = services }
    }

    /// `ping`, `hello`, and a `get` the memory tier answers (no index query, no file read on the
    /// event loop; a disk hit goes to ``handle(_:)``, which also fills the memory tier).
    func answerAtOnce(_ request: ControlRequest) -> Result<JSONValue, ControlError>? {
        guard let services = services.withLock({ $0 }) else { return nil }
        let commands = DaemonCommands(services: services, request: request)
        do {
            return try commands.answerAtOnce().map { .success($0) }
        } catch {
            return .failure(error)
        }
    }

    func handle(_ request: ControlRequest) async -> Result<JSONValue, ControlError> {
        guard let services = services.withLock({ $0 }) else { return .failure(.shuttingDown) }
        let commands = DaemonCommands(services: services, request: request)
        do {
            return .success(try await commands.run())
        } catch {
            return .failure(error)
        }
    }
}

/// One request being answered.
struct DaemonCommands {
    let services: DaemonServices
    let request: ControlRequest

    /// The features `hello` announces.
    static let features = ["subscribe", "pin", "data"]

    /// The reply when it needs no waiting (see ``DaemonCommandHandler/answerAtOnce(_:)``), else nil.
    func answerAtOnce() throws(ControlError) -> JSONValue? {
        switch request.command {
        case "hello": hello()
        case "ping": ["pong": true]
        case "get": try cachedImage(tier: .memory)
        default: nil
        }
    }

    func run() async throws(ControlError) -> JSONValue {
        switch request.command {
        case "hello": hello()
        case "ping": ["pong": true]
        case "status": status()
        case "add": try add()
        case "get": try await get()
        case "evict": try evict()
        case "purge": try await purge()
        case "lists": ["lists": .array(services.spool.lists().map(Self.json))]
        case "cancel": try await cancel()
        case "failed": try await failed()
        case "retry": try await retry()
        case "stats": stats()
        case "fsck": try await fsck()
        default: throw .unknownCommand(request.command)
        }
    }

    private func logChange(_ what: String) {
        services.logger.info("\(what) (by \(request.peer))", metadata: ["peer": "\(request.peer)"])
    }

    /// Who may run the destructive commands, with the admin group of the running settings.
    private var authority: CommandAuthority {
        CommandAuthority(adminGroup: services.config.withLock { $0.adminGroup })
    }

    /// Throws `forbidden` (and logs the refusal) unless the peer may run the destructive `what`.
    private func requirePrivilege(for what: String) throws(ControlError) {
        do {
            try authority.require(request.peer, for: what)
        } catch {
            services.logger.notice("refused \(what): forbidden (by \(request.peer))", metadata: ["peer": "\(request.peer)"])
            throw error
        }
    }

    // MARK: - Reading

    private func status() -> JSONValue {
        let config = services.config.withLock { $0 }
        let budget = services.disk.budget.snapshot
        let downloads = services.downloader.statistics
        let memory = services.memory.statistics
        let totals = (try? services.disk.index.totals()) ?? (entries: 0, bytes: 0)
        let pinned = (try? services.disk.index.pinnedBytes(now: WallClock.nowMilliseconds())) ?? 0
        let lists = services.spool.progress
        let pressureSource = services.pressure.monitor.activeSource
        return [
            "version": .string(ImgdVersion.string), "pid": JSONValue(getpid()),
            "uptime_s": JSONValue(Double((ContinuousClock.now - services.startedAt).components.seconds)),
            "queued": JSONValue(downloads.queued + downloads.waitingRetry), "in_flight": JSONValue(downloads.running),
            "lists_active": JSONValue(lists.lists), "spool": .string(config.spool),
            "cache": [
                "bytes": JSONValue(budget.stored), "entries": JSONValue(totals.entries), "limit": JSONValue(budget.limit),
                "pinned_bytes": JSONValue(pinned), "path": .string(config.cache),
            ],
            "memory": [
                "bytes": JSONValue(memory.bytes), "entries": JSONValue(memory.entries), "limit": JSONValue(memory.limitBytes),
                "pressure_source": .string(pressureSource.code), "pressure_path": pressureSource.path.map { .string($0) } ?? .null,
            ],
            "pressure_events": JSONValue(services.pressure.monitor.eventCount),
            "degraded": .array(services.degradations.map { ["code": .string($0.code), "message": .string($0.message)] }),
        ]
    }

    private func stats() -> JSONValue {
        let downloads = services.downloader.statistics
        let memory = services.memory.statistics
        let counters = services.counters.values
        let evictions = services.disk.evictions
        let evicted = [EvictionReason.size, .space, .command].reduce(0) { $0 + evictions.total($1).files }
        return [
            "downloads": JSONValue(downloads.succeeded), "download_bytes": JSONValue(downloads.bytesDownloaded),
            "download_failures": JSONValue(downloads.failed), "retries": JSONValue(downloads.retries),
            "failures": .object(counters.failuresByCode.mapValues { JSONValue($0) }),
            "coalesced": JSONValue(downloads.coalesced), "cancelled": JSONValue(downloads.cancelled),
            "preempted": JSONValue(downloads.preempted), "paced_out": JSONValue(downloads.pacedOut),
            "memory": ["hits": JSONValue(memory.hits), "misses": JSONValue(memory.misses), "purges": JSONValue(memory.purges)],
            "disk": [
                "hits": JSONValue(counters.diskHits), "misses": JSONValue(counters.misses),
                "evicted": JSONValue(evicted), "expired": JSONValue(evictions.total(.age).files),
            ],
            "gets": JSONValue(counters.gets), "pressure_events": JSONValue(services.pressure.monitor.eventCount),
            "events_dropped": JSONValue(services.events.droppedCount),
        ]
    }

    // MARK: - Fetching

    private func add() throws(ControlError) -> JSONValue {
        let config = services.config.withLock { $0 }
        // Counted before the strings are taken out: the parsed line is all this costs.
        if let count = request.value("urls")?.arrayValue?.count, count > config.maxAddURLs {
            throw .invalidArgument(
                field: "urls", reason: "\(count) URLs, over the limit of \(config.maxAddURLs) in one add (max-add-urls); send them in several")
        }
        let texts = try request.strings("urls")
        let priority = try request.choice("priority", of: ["high", "normal"], default: "normal")
        let pin = try pinDuration()
        var accepted: [ImageURL] = []
        var rejected: [JSONValue] = []
        for text in texts {
            do {
                accepted.append(try ImageURL(text))
            } catch {
                rejected.append(["url": .string(text), "code": .string(FailureCode.badURL.rawValue), "message": .string("\(error)")])
            }
        }
        let queued = services.downloader.prefetch(
            accepted, submitter: .interactive, priority: priority == "high" ? .onDemand : .prefetch, limit: config.heldRequestLimit,
            handler: outcomeReporter(pin: pin))
        guard queued else { throw .queueFull(requests: config.maxQueued, bytes: config.maxQueuedBytes) }
        logChange("add: \(accepted.count) URLs queued")
        return ["accepted": JSONValue(accepted.count), "rejected": .array(rejected)]
    }

    /// The `pin` argument, in milliseconds.
    private func pinDuration() throws(ControlError) -> Int? {
        guard let text = try request.optionalString("pin") else { return nil }
        do {
            return Int(try Duration.parsing(text).components.seconds) * 1000
        } catch {
            throw .invalidArgument(field: "pin", reason: "\(error)")
        }
    }

    /// What becomes of a URL queued by `add` or `retry`: a `fetched` or `failed` event, and a
    /// failure counted by its code in `stats` (as the spool's lists count theirs); a success is
    /// pinned for `pin` milliseconds when given.
    private func outcomeReporter(pin: Int? = nil) -> @Sendable (ImageURL, Result<CachedImage, DownloadError>) -> Void {
        let events = services.events
        let disk = services.disk
        let counters = services.counters
        return { url, result in
            switch result {
            case .success(let image):
                if let pin { try? disk.index.pin(image.key, until: WallClock.nowMilliseconds() + pin) }
                if image.source == .network, let download = image.download {
                    events.publish("fetched", data: [
                        "url": .string(url.normalized), "bytes": JSONValue(image.bytes),
                        "format": .string(download.image.format.rawValue),
                    ])
                }
            case .failure(let error):
                counters.update { $0.failuresByCode[error.code, default: 0] += 1 }
                events.publish("failed", data: ["url": .string(url.normalized), "code": .string(error.code), "message": .string(error.message)])
            }
        }
    }

    private func url(_ field: String = "url") throws(ControlError) -> ImageURL {
        let text = try request.string(field)
        do {
            return try ImageURL(text)
        } catch {
            throw .invalidArgument(field: field, reason: "\(error)")
        }
    }

    private func hello() -> JSONValue {
        ["protocol": 1, "version": .string(ImgdVersion.string), "features": JSONValue(Self.features)]
    }

    /// `get`'s answer from one tier, counted as a get and a hit; nil, and nothing counted, on a
    /// miss. The memory tier is asked by ``answerAtOnce()``, on the event loop; `get()`, which
    /// runs only when that found nothing, asks the disk tier.
    private func cachedImage(tier: CacheSource) throws(ControlError) -> JSONValue? {
        let url = try url()
        let data = try request.bool("data", default: false)
        let need: CacheNeed = data ? .bytes : .file
        let tiers = services.tiers
        let found: CacheHit?
        if tier == .memory {
            found = tiers.memoryLookup(url.cacheKey, needs: need)
            if data, let found { try checkDataSize(found.entry.entry.bytes) }
        } else if data {
            // The size first, from the index: an image too large to return is never read.
            guard let entry = tiers.diskLookup(url.cacheKey, needs: .file) else { return nil }
            try checkDataSize(entry.entry.entry.bytes)
            found = tiers.diskLookup(url.cacheKey, needs: .bytes)
        } else {
            found = tiers.diskLookup(url.cacheKey, needs: .file)
        }
        guard let hit = found else { return nil }
        services.counters.update { counters in
            counters.gets += 1
            if hit.source == .disk { counters.diskHits += 1 }
        }
        return Self.json(hit, source: hit.source, data: need == .bytes)
    }

    /// `too_large` for an image over `max-data-bytes`, which `data: true` would hold in memory
    /// twice (its bytes and their base64) and queue whole for the connection.
    private func checkDataSize(_ bytes: Int) throws(ControlError) {
        let limit = services.config.withLock { $0.maxDataBytes }
        guard bytes <= limit else { throw .dataTooLarge(bytes: bytes, limit: limit) }
    }

    private func get() async throws(ControlError) -> JSONValue {
        let url = try url()
        let fetch = try request.bool("fetch", default: true)
        let wait = try request.bool("wait", default: true)
        let data = try request.bool("data", default: false)
        let need: CacheNeed = data ? .bytes : .file
        if let cached = try cachedImage(tier: .disk) { return cached }
        services.counters.update { counters in
            counters.gets += 1
            counters.misses += 1
        }
        guard fetch else { throw .notFound("\(url.normalized) is not cached (fetch: false)") }
        let downloader = services.downloader
        guard wait else {
            // No task per request: a held token, counted against max-queued like an add's.
            let limit = services.config.withLock { $0.heldRequestLimit }
            // Its failure is counted as a waiting get's is; the reply went out already, so no one
            // else would hear of it.
            let counters = services.counters
            let counted: @Sendable (ImageURL, Result<CachedImage, DownloadError>) -> Void = { _, result in
                if case .failure(let error) = result { counters.update { $0.failuresByCode[error.code, default: 0] += 1 } }
            }
            guard downloader.prefetch([url], submitter: .interactive, priority: .onDemand, limit: limit, handler: counted) else {
                throw .queueFull(requests: limit.requests, bytes: limit.bytes)
            }
            return ["pending": true]
        }
        let image: CachedImage
        do {
            image = try await downloader.fetch(url, priority: .onDemand)
        } catch {
            services.counters.update { $0.failuresByCode[error.code, default: 0] += 1 }
            throw .other(code: error.code, message: error.message)
        }
        if data { try checkDataSize(image.bytes) }
        guard let hit = services.tiers.lookup(url.cacheKey, needs: need) else {
            throw .other(code: FailureCode.disk.rawValue, message: "\(url.normalized) was fetched but is gone from the cache again (evicted at once: is the cache too small?)")
        }
        return Self.json(hit, source: image.source == .network ? .network : hit.source, data: data)
    }

    /// Counted, and published as an `evicted` event, by the disk tier's ledger.
    private func evict() throws(ControlError) -> JSONValue {
        try requirePrivilege(for: "evict")
        var keys: [CacheKey] = []
        for text in try request.strings("urls") {
            guard let url = try? ImageURL(text) else { throw .invalidArgument(field: "urls", reason: "\(text) is not an http(s) URL") }
            keys.append(url.cacheKey)
        }
        for key in keys { services.memory.remove(key) }
        let pass: EvictionPass
        do {
            pass = try services.disk.evict(keys)
        } catch {
            throw .other(code: FailureCode.disk.rawValue, message: "cannot evict: the cache index refused: \(error)")
        }
        logChange("evict: \(pass.files) entries")
        return ["evicted": JSONValue(pass.files)]
    }

    private func purge() async throws(ControlError) -> JSONValue {
        switch try request.choice("tier", of: ["memory", "disk"], default: "") {
        case "memory":
            let held = services.memory.statistics.bytes
            logChange("purge: memory tier")
            services.pressure.purge()
            return ["purged_bytes": JSONValue(held)]
        default:
            try requirePrivilege(for: "purge of the disk tier")
            logChange("purge: disk tier")
            services.memory.purge()
            let pass = await services.maintainer.purgeAll()
            return ["evicted": JSONValue(pass.files), "bytes": JSONValue(pass.bytes)]
        }
    }

    /// Verifies every disk entry (size and SHA-256) while the daemon runs, on a thread of its
    /// own (it reads the whole cache); bad entries are dropped and fetched again when asked for.
    private func fsck() async throws(ControlError) -> JSONValue {
        try requirePrivilege(for: "fsck")
        guard services.checking.compareExchange(expected: false, desired: true, ordering: .acquiring).exchanged else {
            throw .other(code: "busy", message: "a cache check is already running; try again when it has finished")
        }
        defer { services.checking.store(false, ordering: .releasing) }
        logChange("fsck: checking every entry of \(services.disk.directory.root)")
        let disk = services.disk, memory = services.memory, logger = services.logger
        let outcome: Result<(report: CacheCheckReport, bytes: Int), SQLiteError> = await withCheckedContinuation { continuation in
            Thread.detachNewThread {
                var bytes = 0
                let checked = Result { () throws(SQLiteError) in
                    try disk.checkAll(removingOrphans: false) { entry, problem in
                        memory.remove(entry.key)
                        bytes += entry.bytes
                        logger.warning("fsck: removed \(EchoedText.cut(entry.url)): \(problem)", metadata: ["url": "\(entry.url)"])
                    }
                }
                continuation.resume(returning: checked.map { ($0, bytes) })
            }
        }
        let report: CacheCheckReport, bytes: Int
        do {
            (report, bytes) = try outcome.get()
        } catch {
            throw .other(code: FailureCode.disk.rawValue, message: "the cache check stopped: \(error)")
        }
        if report.removed > 0 {
            services.events.publish(
                "evicted", data: ["count": JSONValue(report.removed), "bytes": JSONValue(bytes), "reason": "fsck"])
        }
        services.logger.info("fsck: checked \(report.checked) entries: \(report.bad) bad, \(report.removed) removed")
        return ["checked": JSONValue(report.checked), "bad": JSONValue(report.bad), "removed": JSONValue(report.removed)]
    }

    // MARK: - Lists and failures

    private func cancel() async throws(ControlError) -> JSONValue {
        if let name = try request.optionalString("list") {
            // Its own list anyone may cancel; another user's only the privileged.
            let authority = authority, peer = request.peer
            let outcome = await services.spool.cancel(list: name) { owner in
                (owner != nil && owner == peer.uid && peer != .unknown) || authority.isPrivileged(peer)
            }
            switch outcome {
            case .cancelled(let pending):
                logChange("cancel: list \(EchoedText.cut(name))")
                return ["cancelled": JSONValue(pending)]
            case .notFound:
                throw .notFound("no list in progress is named \(EchoedText.cut(name))")
            case .forbidden(let owner):
                // Cut: the name is the client's text (the log escapes it; the reply cuts it too).
                services.logger.notice(
                    "refused cancel of list \(EchoedText.cut(name)): forbidden (by \(peer))",
                    metadata: ["list": "\(name)", "peer": "\(peer)"])
                let whose = owner.map { "uid \($0)" } ?? "a user not recorded"
                throw .forbidden(
                    "list \(EchoedText.cut(name)) was dropped by \(whose); cancelling another user's list is allowed only to "
                        + "\(authority.allowed); \(CommandAuthority.describe(peer)) is none of these")
            }
        }
        let url = try url()
        // 1 when a download of the URL was queued, running or waiting for a retry; 0 when none was.
        let cancelled = await services.downloader.cancelDownload(of: url)
        logChange("cancel: \(EchoedText.cut(url.normalized))\(cancelled ? "" : ", nothing to cancel")")
        return ["cancelled": cancelled ? 1 : 0]
    }

    /// Failures in pages of `limit` (default and most 1,000), from `after` (a cursor from an
    /// earlier page's `next`); `next` is null on the last page.
    private func failed() async throws(ControlError) -> JSONValue {
        let limit = try request.int("limit", default: Self.failurePageLimit, in: 1...Self.failurePageLimit)
        let after = try request.optionalString("after").map { text throws(ControlError) in try FailureCursor(token: text, field: "after") }
        if let name = try request.optionalString("list") {
            let seq: Int
            switch after {
            case nil: seq = 0
            case .listSeq(let value): seq = value
            case .url: throw .invalidArgument(field: "after", reason: "a cursor of the remembered failures, not of a list's")
            }
            // One more than asked, to know whether a next page exists.
            guard let page = services.spool.failures(list: name, afterSeq: seq, limit: limit + 1) else {
                throw .notFound("no list is named \(EchoedText.cut(name))")
            }
            let shown = page.prefix(limit)
            let next = page.count > limit ? shown.last.map { JSONValue.string(FailureCursor.listSeq($0.seq).token) } : nil
            return ["failures": .array(shown.map {
                [
                    "url": .string($0.failure.url), "code": .string($0.failure.code), "message": .string($0.failure.message),
                    "list": .string(name), "line": JSONValue($0.failure.line),
                ]
            }), "next": next ?? .null]
        }
        let url: String?
        switch after {
        case nil: url = nil
        case .url(let value): url = value
        case .listSeq: throw .invalidArgument(field: "after", reason: "a cursor of a list's failures, not of the remembered ones")
        }
        let page = await services.downloader.rememberedFailures(after: url, limit: limit)
        let next = page.hasMore ? page.failures.last.map { JSONValue.string(FailureCursor.url($0.url).token) } : nil
        return ["failures": .array(page.failures.map {
            ["url": .string($0.url), "code": .string($0.error.code), "message": .string($0.error.message)]
        }), "next": next ?? .null]
    }

    /// Failures in one `failed` reply, at most and by default.
    static let failurePageLimit = 1_000

    private func retry() async throws(ControlError) -> JSONValue {
        if let name = try request.optionalString("list") {
            guard let requeued = await services.spool.retry(list: name) else { throw .notFound("no list is named \(EchoedText.cut(name))") }
            logChange("retry: list \(EchoedText.cut(name)), \(requeued) URLs")
            return ["requeued": JSONValue(requeued)]
        }
        if request.value("url") != nil {
            let url = try url()
            let limit = services.config.withLock { $0.heldRequestLimit }
            services.downloader.forgetFailures(of: url)
            guard services.downloader.prefetch([url], submitter: .interactive, priority: .prefetch, limit: limit, handler: outcomeReporter())
            else { throw .queueFull(requests: limit.requests, bytes: limit.bytes) }
            logChange("retry: \(EchoedText.cut(url.normalized))")
            return ["requeued": 1]
        }
        try requirePrivilege(for: "retry of every remembered failure (no url, no list)")
        let remembered = await services.downloader.rememberedFailures()
        // Checked before the failures are forgotten (a refused retry must leave them as they
        // were); another request may still take the room meanwhile, which the limit tolerates.
        let limit = services.config.withLock { $0.heldRequestLimit }
        let rememberedBytes = remembered.reduce(0) { $0 + $1.url.utf8.count }
        guard services.downloader.heldRequests + remembered.count <= limit.requests,
            services.downloader.heldRequestBytes + rememberedBytes <= limit.bytes
        else { throw .queueFull(requests: limit.requests, bytes: limit.bytes) }
        services.downloader.forgetFailures()
        let urls = remembered.compactMap { try? ImageURL($0.url) }
        services.downloader.prefetch(urls, submitter: .interactive, priority: .prefetch, handler: outcomeReporter())
        logChange("retry: \(urls.count) remembered failures")
        return ["requeued": JSONValue(urls.count)]
    }

    // MARK: - Shapes

    static func json(_ hit: CacheHit, source: CacheSource, data: Bool) -> JSONValue {
        let entry = hit.entry.entry
        var result: [String: JSONValue] = [
            "path": .string(hit.entry.path), "bytes": JSONValue(entry.bytes), "sha256": .string(entry.sha256.hex),
            "format": .string(entry.format.rawValue), "width": entry.width.map { JSONValue($0) } ?? .null,
            "height": entry.height.map { JSONValue($0) } ?? .null, "source": .string(source.rawValue),
        ]
        if data, let bytes = hit.bytes { result["data"] = .string(Base64.encode(bytes)) }
        return .object(result)
    }

    static func json(_ record: ListRecord) -> JSONValue {
        [
            "name": .string(record.name), "state": .string(record.state.rawValue), "total": JSONValue(record.total),
            "cached": JSONValue(record.cached), "already_cached": JSONValue(record.alreadyCached),
            "failed": JSONValue(record.failed), "pending": JSONValue(record.pending), "bytes": JSONValue(record.bytes),
            "claimed_at": JSONValue(record.claimedAt), "format": .string(record.format),
        ]
    }
}
