import ImgdCore
import ImgdNetwork
import ImgdProtocol
import ImgdStore
import Logging

extension DaemonCommands {
    func add() async throws(ControlError) -> JSONValue {
        let config = services.config.withLock { $0 }
        // Counted before the strings are taken out: the parsed line is all this costs.
        if let count = request.value("urls")?.arrayValue?.count, count > config.maxAddURLs {
            throw .invalidArgument(
                field: "urls", reason: "\(count) URLs, over the limit of \(config.maxAddURLs) in one add (max-add-urls); send them in several")
        }
        // With a deadline the URLs become a list (``AddedList``); `name` names that list.
        if let readyBy = try request.optionalString("ready_by") { return try await addList(readyBy: readyBy, config: config) }
        if request.value("name") != nil {
            throw .invalidArgument(field: "name", reason: "names the list an add with ready_by makes: give ready_by too, or leave name out")
        }
        let items = try addItems()
        let priority = try request.choice("priority", of: ["high", "normal"], default: "normal")
        let pin = try pinDuration()
        let refresh = try refreshRule()
        var requests: [ImageRequest] = []
        // Pins of items that name their own, by key (the handler sees the key).
        var pins: [CacheKey: Int] = [:]
        var rejected: [JSONValue] = []
        for (text, options) in items {
            let parsed: Result<ImageRequest, ImageURLError>
            switch options {
            case .success(let options):
                do {
                    let url = try ImageURL(text)
                    var request = services.downloader.request(for: url, chosenKey: options.key, owner: self.request.peer.uid, sha256: options.sha256)
                    if options.isHighPriority { request.priority = .onDemand }
                    request.refresh = options.refresh ?? refresh
                    request.mirrors = options.mirrors
                    // A signed URL past its expiry (and not cached) is refused in the reply: it would
                    // only fail, and the caller needs its expiry to re-sign it.
                    if let expired = services.downloader.expiredAndMissing(request) {
                        rejected.append(["url": .string(text), "code": .string(expired.code), "message": .string(expired.message)])
                        services.outcomes.record(url, .failure(expired))
                        continue
                    }
                    if let own = options.pin { pins[request.key] = Int(own.components.seconds) * 1000 }
                    requests.append(request)
                    continue
                } catch {
                    parsed = .failure(error)
                }
            case .failure(let reason):
                parsed = .failure(.malformed(text, reason: reason.description))
            }
            if case .failure(let error) = parsed {
                rejected.append(["url": .string(text), "code": .string(FailureCode.badURL.rawValue), "message": .string("\(error)")])
            }
        }
        let limit = heldLimit
        let queued = services.downloader.prefetch(
            requests, submitter: .interactive, priority: priority == "high" ? .onDemand : .prefetch, limit: limit,
            caller: request.peer.uid, handler: outcomeReporter(pin: pin, pins: pins))
        guard queued else {
            throw queueFull(limit, adding: requests.count, bytes: requests.reduce(0) { $0 + $1.url.normalized.utf8.count })
        }
        // URLs already on disk were answered during the call: their pins are written before the
        // reply, as they were when the handler wrote them itself.
        if pin != nil || !pins.isEmpty { await services.pins.flushed() }
        logChange("add: \(requests.count) URLs queued")
        return ["accepted": JSONValue(requests.count), "rejected": .array(rejected)]
    }

    /// `add` with `ready_by`: the URLs become a list with that deadline, owned by the peer,
    /// kept across a restart and reported like a dropped one. Bad items are rejected in the
    /// reply and recorded as failed lines of the list (so its report has them too).
    private func addList(readyBy text: String, config: DaemonConfig) async throws(ControlError) -> JSONValue {
        let now = WallClock.nowMilliseconds()
        let deadline: Int
        do {
            deadline = Int(try ReadyBy(parsing: text).deadline(afterMilliseconds: Int64(now), in: SystemLocalZone()))
        } catch {
            throw .invalidArgument(field: "ready_by", reason: "\(error)")
        }
        // A deadline already past is most likely a slip (a year, a zone): said, not warmed late.
        if deadline <= now {
            throw .invalidArgument(
                field: "ready_by", reason: "'\(EchoedText.cut(text))' is \(URLExpiry.iso8601(milliseconds: deadline)), which has passed")
        }
        let uid = request.peer.uid
        var name = try request.optionalString("name") ?? "add-\(uid)-\(Self.compactTime(now))"
        // Checked with its `.json`: `x.report` would otherwise become a report's name.
        if !name.hasSuffix(".json") { name += ".json" }
        if let problem = AddedList.problem(withName: name) { throw .invalidArgument(field: "name", reason: problem) }
        let items = try addItems()
        let isHigh = try request.choice("priority", of: ["high", "normal"], default: "normal") == "high"
        let pin = try pinDuration()
        let refresh = try refreshRule()
        var rejected: [JSONValue] = []
        var entries: [(text: String, item: AddedList.Item)] = []
        entries.reserveCapacity(items.count)
        for (text, options) in items {
            let parsed: AddedList.Item
            switch options {
            case .success(var options):
                do {
                    if isHigh { options.isHighPriority = true }
                    parsed = .url(try ImageURL(text), options)
                } catch {
                    parsed = .bad("\(error)")
                }
            case .failure(let reason):
                parsed = .bad("\(ImageURLError.malformed(text, reason: reason.description))")
            }
            if case .bad(let message) = parsed {
                rejected.append(["url": .string(text), "code": .string(FailureCode.badURL.rawValue), "message": .string(message)])
            }
            entries.append((text, parsed))
        }
        // The list's file: the `urls` as given, with the deadline as an instant.
        let file: JSONValue = ["ready_by": .string(URLExpiry.iso8601(milliseconds: deadline)), "urls": request.value("urls") ?? .array([])]
        // A member's added lists are bounded by its share of max-queued, judged on the spool's
        // queue against every list recorded before (``SpoolService/add(_:)``).
        let share = authority.isPrivileged(request.peer) ? nil : heldLimit.callerRequests
        let added = AddedList(
            name: name, owner: uid, items: entries, file: Array((file.jsonText + "\n").utf8), readyBy: deadline, pinMilliseconds: pin,
            refresh: refresh, ownerShare: share)
        let record = try await services.spool.add(added)
        logChange("add: list \(EchoedText.cut(record.name)) of \(entries.count) URLs, ready by \(URLExpiry.iso8601(milliseconds: deadline))")
        return [
            "accepted": JSONValue(entries.count - rejected.count), "rejected": .array(rejected), "list": .string(record.name),
            "ready_by": JSONValue(deadline),
        ]
    }

    /// `20261207T053000.123Z`: a default name's time, in UTC, to the millisecond.
    static func compactTime(_ milliseconds: Int) -> String {
        let second = URLExpiry.iso8601(milliseconds: milliseconds).filter { $0 != "-" && $0 != ":" && $0 != "Z" }
        return second + "." + String(String(1000 + milliseconds % 1000).dropFirst()) + "Z"
    }

    /// `add`'s `urls`: each a URL string, or an object with `url` and the options of an object
    /// link list item (`key`, `sha256`, `pin`, `priority`, `refresh`, `mirrors`; others ignored). A bad option
    /// rejects its item, not the add.
    private func addItems() throws(ControlError) -> [(url: String, options: Result<LinkListItemOptions, LinkListItemError>)] {
        guard let value = request.value("urls") else { throw .invalidArgument(field: "urls", reason: "is required") }
        guard let elements = value.arrayValue else {
            throw .invalidArgument(field: "urls", reason: "must be an array of URL strings and objects, not \(value.kindDescription)")
        }
        guard !elements.isEmpty else { throw .invalidArgument(field: "urls", reason: "must not be empty") }
        var items: [(url: String, options: Result<LinkListItemOptions, LinkListItemError>)] = []
        items.reserveCapacity(elements.count)
        for (index, element) in elements.enumerated() {
            if let text = element.stringValue {
                items.append((text, .success(.none)))
                continue
            }
            guard let object = element.objectValue, let url = object["url"]?.stringValue else {
                throw .invalidArgument(
                    field: "urls", reason: "element \(index) must be a URL string or an object with a \"url\" string, not \(element.kindDescription)")
            }
            var options = LinkListItemOptions()
            var problem: LinkListItemError?
            for field in ["key", "sha256", "pin", "priority", "refresh"] {
                guard let member = object[field], member != .null else { continue }
                guard let text = member.stringValue else {
                    problem = problem ?? LinkListItemError(field: field, reason: "not a string but \(member.kindDescription)")
                    continue
                }
                do {
                    try options.set(field, to: text)
                } catch {
                    problem = problem ?? error
                }
            }
            if problem == nil, let member = object["mirrors"], member != .null {
                do {
                    options.mirrors = try Self.mirrors(member)
                } catch {
                    problem = error
                }
            }
            items.append((url, problem.map { .failure($0) } ?? .success(options)))
        }
        return items
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
    /// lists record theirs; a success is pinned for `pin` milliseconds when given, in a batch
    /// off the engine's thread (``PinWriter``), and its outcome recorded once the pin is written.
    func outcomeReporter(pin: Int? = nil, pins: [CacheKey: Int] = [:]) -> @Sendable (ImageURL, Result<CachedImage, DownloadError>) -> Void {
        let outcomes = services.outcomes
        let writer = services.pins
        return { url, result in
            if case .success(let image) = result, let pin = pins[image.key] ?? pin {
                writer.pin(image.key, for: pin, thenRecord: url, result)
            } else {
                outcomes.record(url, result)
            }
        }
    }

    /// Asks the index once: the disk tier's lookup; on a miss the downloader does not look
    /// again, and hands back the row it recorded, which the reply is made from.
    func get() async throws(ControlError) -> JSONValue {
        let arguments = try getArguments()
        let fetch = try request.bool("fetch", default: true)
        let wait = try request.bool("wait", default: true)
        guard wait else { return try getWithoutWaiting(arguments, fetch: fetch) }
        let answer = try await diskOrNetworkHit(arguments, fetch: fetch)
        return Self.json(answer.hit, source: answer.source, data: arguments.data)
    }

    /// `get` with `wait: false`: a hit as usual, else the URL queued and `pending` answered.
    private func getWithoutWaiting(_ arguments: GetArguments, fetch: Bool) throws(ControlError) -> JSONValue {
        if let cached = try cachedImage(tier: .disk, arguments: arguments) { return cached }
        countMiss()
        let url = arguments.image.url
        guard fetch else { throw .notFound("\(url.normalized) is not cached (fetch: false)") }
        // No task per request: a held token, counted against max-queued like an add's.
        let limit = heldLimit
        // Its outcome is recorded like a waiting get's: the reply went out already.
        guard services.downloader.prefetch(
            [arguments.image], submitter: .interactive, priority: .onDemand, limit: limit, caller: request.peer.uid,
            handler: outcomeReporter())
        else {
            throw queueFull(limit, adding: 1, bytes: url.normalized.utf8.count)
        }
        // Not a lookup: no latency recorded for it.
        request.prepared.noteUnmeasured()
        return ["pending": true]
    }

    /// A `get` the memory tier did not answer: the disk tier's hit, else (with `fetch`) the
    /// image downloaded and its hit, and the source to report (`network` for a body fetched now).
    func diskOrNetworkHit(_ arguments: GetArguments, fetch: Bool) async throws(ControlError) -> (hit: CacheHit, source: CacheSource) {
        if let cached = try cachedHit(tier: .disk, arguments: arguments) { return (cached.hit, cached.hit.source) }
        countMiss()
        let image = arguments.image
        guard fetch else { throw .notFound("\(image.url.normalized) is not cached (fetch: false)") }
        let fetched = try await fetchNow(image)
        if arguments.data { try checkDataSize(fetched.bytes) }
        // From the row the downloader recorded (a revalidation's 304 hands back none: looked up).
        let found: CacheHit?
        if let entry = fetched.entry {
            found = services.tiers.recordedHit(CachedEntry(entry: entry, path: fetched.path), needs: arguments.need)
        } else {
            found = services.tiers.lookup(image.key, needs: arguments.need)
        }
        guard let hit = found else { throw Self.goneAgain(image.url) }
        let source = fetched.source == .network ? CacheSource.network : hit.source
        request.prepared.noteSource(DaemonHistograms.Source(source))
        return (hit, source)
    }

    /// A `get` counted as a miss of both tiers.
    func countMiss() {
        services.counters.update { counters in
            counters.gets += 1
            counters.misses += 1
        }
    }

    /// Downloads `image` now, at on-demand priority, its outcome recorded; a new body under the
    /// key (a digest asked for, a signed URL's other form) replaces what the memory tier may
    /// hold of the old one.
    func fetchNow(_ image: ImageRequest) async throws(ControlError) -> CachedImage {
        let fetched: CachedImage
        do {
            fetched = try await services.downloader.fetch(image, priority: .onDemand, caller: request.peer.uid, checkingDisk: false)
            services.outcomes.record(image.url, .success(fetched))
        } catch {
            services.outcomes.record(image.url, .failure(error))
            throw .other(code: error.code, message: error.message)
        }
        if fetched.source == .network { services.memory.remove(image.key) }
        return fetched
    }

    /// An image fetched and gone from the cache again before it could be answered.
    static func goneAgain(_ url: ImageURL) -> ControlError {
        .other(
            code: FailureCode.disk.rawValue,
            message: "\(url.normalized) was fetched but is gone from the cache again (evicted at once: is the cache too small?)")
    }
}
