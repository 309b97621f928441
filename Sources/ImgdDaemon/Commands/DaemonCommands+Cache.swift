import ImgdCore
import ImgdNetwork
import ImgdProtocol
import ImgdStore
import Logging

extension DaemonCommands {
    /// `get`'s answer from one tier, counted as a get and a hit; nil, and nothing counted, on a
    /// miss. The memory tier is asked by ``answerAtOnce()``, on the event loop; `get()`, which
    /// runs only when that found nothing, asks the disk tier.
    func cachedImage(tier: CacheSource, arguments: GetArguments? = nil) throws(ControlError) -> JSONValue? {
        try cachedHit(tier: tier, arguments: arguments).map { Self.json($0.hit, source: $0.hit.source, data: $0.withData) }
    }

    /// A `get` answered by a tier: the hit, and whether its bytes go in the reply (`data`).
    struct TierAnswer {
        let hit: CacheHit
        let withData: Bool
    }

    /// What ``cachedImage(tier:)`` answers, before it is made JSON: counted as a get and a hit;
    /// nil, and nothing counted, on a miss.
    func cachedHit(tier: CacheSource, arguments given: GetArguments? = nil) throws(ControlError) -> TierAnswer? {
        let arguments: GetArguments
        if let given { arguments = given } else { arguments = try getArguments() }
        let image = arguments.image, data = arguments.data, need = arguments.need
        let tiers = services.tiers
        let found: CacheHit?
        if tier == .memory {
            found = tiers.memoryLookup(image.key, needs: need)
            if data, let found, Self.hasDigest(found, image) { try checkDataSize(found.entry.entry.bytes) }
            // No answer here goes on in a task, which takes the arguments from here (a hit keeps nothing).
            if found.map({ !Self.hasDigest($0, image) }) ?? true { request.prepared.keep(arguments) }
        } else {
            // One index query. The size first, from the row: an image too large to return is
            // never read.
            guard let entry = tiers.disk.lookup(image.key) else { return nil }
            tiers.disk.index.recordAccess(image.key, at: WallClock.nowMilliseconds())
            guard image.expectedSHA256 == nil || image.expectedSHA256 == entry.entry.sha256 else { return nil }
            if data { try checkDataSize(entry.entry.bytes) }
            found = tiers.diskHit(entry, needs: need)
        }
        // An entry with another digest than the one asked for is a miss: `get` fetches again.
        guard let hit = found, Self.hasDigest(hit, image) else { return nil }
        // Served at once all the same; a due entry is revalidated behind the answer.
        services.downloader.revalidateIfDue(image, entry: hit.entry.entry)
        services.counters.update { counters in
            counters.gets += 1
            if hit.source == .disk { counters.diskHits += 1 }
        }
        request.prepared.noteSource(DaemonHistograms.Source(hit.source))
        return TierAnswer(hit: hit, withData: need == .bytes)
    }

    /// Whether `hit` is the image `image` asks for: any entry under its key, or only one with
    /// the digest it names.
    static func hasDigest(_ hit: CacheHit, _ image: ImageRequest) -> Bool {
        image.expectedSHA256 == nil || image.expectedSHA256 == hit.entry.entry.sha256
    }

    /// `too_large` for an image over `max-data-bytes`, which `data: true` would hold in memory
    /// twice (its bytes and their base64) and queue whole for the connection.
    func checkDataSize(_ bytes: Int) throws(ControlError) {
        let limit = services.config.withLock { $0.maxDataBytes }
        guard bytes <= limit else { throw .dataTooLarge(bytes: bytes, limit: limit) }
    }

    /// Counted, and published as an `evicted` event, by the disk tier's ledger.
    func evict() throws(ControlError) -> JSONValue {
        try requirePrivilege(for: "evict")
        var keys: [CacheKey] = []
        for text in try request.strings("urls") {
            guard let url = try? ImageURL(text) else { throw .invalidArgument(field: "urls", reason: "\(text) is not an http(s) URL") }
            keys.append(services.downloader.cacheKey(for: url))
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

    func purge() async throws(ControlError) -> JSONValue {
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

    /// Verifies every disk entry (size and SHA-256) while the daemon runs, on the checker's own
    /// queue (it reads the whole cache); bad entries are dropped and fetched again when asked for.
    func fsck() async throws(ControlError) -> JSONValue {
        try requirePrivilege(for: "fsck")
        guard services.checking.compareExchange(expected: false, desired: true, ordering: .acquiring).exchanged else {
            throw .other(code: "busy", message: "a cache check is already running; try again when it has finished")
        }
        defer { services.checking.store(false, ordering: .releasing) }
        logChange("fsck: checking every entry of \(services.disk.directory.root)")
        let outcome = await services.checker.check(services.disk, memory: services.memory, logger: services.logger)
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


    static func json(_ hit: CacheHit, source: CacheSource, data: Bool) -> JSONValue {
        var result = members(hit.entry, source: source)
        if data, let bytes = hit.bytes { result["data"] = .string(Base64.encode(bytes)) }
        return .object(result)
    }

    /// A `get` result's members for `recorded`, without `data`.
    static func members(_ recorded: CachedEntry, source: CacheSource) -> [String: JSONValue] {
        let entry = recorded.entry
        return [
            "path": .string(recorded.path), "bytes": JSONValue(entry.bytes), "sha256": .string(entry.sha256.hex),
            "format": .string(entry.format.rawValue), "width": entry.width.map { JSONValue($0) } ?? .null,
            "height": entry.height.map { JSONValue($0) } ?? .null, "source": .string(source.rawValue),
        ]
    }
}
