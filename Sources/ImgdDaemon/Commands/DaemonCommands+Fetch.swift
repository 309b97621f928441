import Foundation
import ImgdCore
import ImgdNetwork
import ImgdProtocol
import ImgdStore
import Logging

extension DaemonCommands {
    func add() throws(ControlError) -> JSONValue {
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
    func pinDuration() throws(ControlError) -> Int? {
        guard let text = try request.optionalString("pin") else { return nil }
        do {
            return Int(try Duration.parsing(text).components.seconds) * 1000
        } catch {
            throw .invalidArgument(field: "pin", reason: "\(error)")
        }
    }

    /// What becomes of a URL queued by `add`, `retry` or `get`: its outcome recorded (a
    /// `fetched` or `failed` event, a failure counted by its code in `stats`), as the spool's
    /// lists record theirs; a success is pinned for `pin` milliseconds when given.
    func outcomeReporter(pin: Int? = nil) -> @Sendable (ImageURL, Result<CachedImage, DownloadError>) -> Void {
        let outcomes = services.outcomes
        let disk = services.disk
        return { url, result in
            if let pin, case .success(let image) = result {
                try? disk.index.pin(image.key, until: WallClock.nowMilliseconds() + pin)
            }
            outcomes.record(url, result)
        }
    }

    func get() async throws(ControlError) -> JSONValue {
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
            // Its outcome is recorded like a waiting get's: the reply went out already.
            guard downloader.prefetch([url], submitter: .interactive, priority: .onDemand, limit: limit, handler: outcomeReporter()) else {
                throw .queueFull(requests: limit.requests, bytes: limit.bytes)
            }
            return ["pending": true]
        }
        let image: CachedImage
        do {
            image = try await downloader.fetch(url, priority: .onDemand)
            services.outcomes.record(url, .success(image))
        } catch {
            services.outcomes.record(url, .failure(error))
            throw .other(code: error.code, message: error.message)
        }
        if data { try checkDataSize(image.bytes) }
        guard let hit = services.tiers.lookup(url.cacheKey, needs: need) else {
            throw .other(code: FailureCode.disk.rawValue, message: "\(url.normalized) was fetched but is gone from the cache again (evicted at once: is the cache too small?)")
        }
        return Self.json(hit, source: image.source == .network ? .network : hit.source, data: data)
    }
}
