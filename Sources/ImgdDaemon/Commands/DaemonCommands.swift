import ImgdCore
import ImgdNetwork
import ImgdProtocol
import ImgdStore
import Logging

/// One request being answered.
struct DaemonCommands {
    let services: DaemonServices
    let request: ControlRequest

    /// `get`'s optional members that shape its image request (kept once: every `get` reads them).
    static let imageOptionFields = ["key", "sha256", "refresh"]

    /// The features `hello` announces.
    static let features = ["subscribe", "pin", "data", "explain", "ready", "metrics", "fd", "mirrors", "warm-set", "deadlines"]

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
        case "add": try await add()
        case "get": try await get()
        case "evict": try evict()
        case "purge": try await purge()
        case "lists": try await lists()
        case "cancel": try await cancel()
        case "failed": try await failed()
        case "retry": try await retry()
        case "refresh": try await refresh()
        case "stats": stats()
        case "metrics": services.metricsSnapshot()
        case "fsck": try await fsck()
        case "reload": try await reload()
        case "explain": try await explain()
        case "wait-ready": try await waitReady()
        default: throw .unknownCommand(request.command)
        }
    }

    /// The daemon's logger with this request's `peer=` on every line.
    var peerLogger: Logger { services.logger.forPeer(request.peer) }

    func logChange(_ what: String) {
        peerLogger.info("\(what)")
    }

    /// Who may run the destructive commands, with the admin group of the running settings.
    var authority: CommandAuthority {
        CommandAuthority(adminGroup: services.config.withLock { $0.adminGroup })
    }

    /// Throws `forbidden` (and logs the refusal) unless the peer may run the destructive `what`.
    func requirePrivilege(for what: String) throws(ControlError) {
        do {
            try authority.require(request.peer, for: what)
        } catch {
            peerLogger.notice("refused \(what): forbidden")
            throw error
        }
    }

    func url(_ field: String = "url") throws(ControlError) -> ImageURL {
        let text = try request.string(field)
        do {
            return try services.imageURLs.url(text)
        } catch {
            throw .invalidArgument(field: field, reason: "\(error)")
        }
    }

    /// `get`'s arguments, parsed once: on the event loop when the memory tier is asked, and
    /// kept with the request (``ControlRequest/prepared``) for the task that asks the disk
    /// tier and the network when it cannot answer.
    /// (`fetch` and `wait` are read by the task alone: a memory hit never looked at them.)
    struct GetArguments: Sendable {
        /// Its `url`, `key`, `sha256` and `refresh`.
        let image: ImageRequest
        /// Whether the reply carries the bytes.
        let data: Bool
        var need: CacheNeed { data ? .bytes : .file }
    }

    /// `get`'s arguments, as parsed for this request already (kept by a memory miss), else
    /// parsed now.
    func getArguments() throws(ControlError) -> GetArguments {
        if let parsed = request.prepared.value(as: GetArguments.self) { return parsed }
        return GetArguments(image: try imageRequest(), data: try request.bool("data", default: false))
    }

    /// `get`'s image: its `url`, stored under the `key` it chose or the URL's key under the
    /// host tables' `key-ignore-query`, wanting the `sha256` it names, if any.
    func imageRequest() throws(ControlError) -> ImageRequest {
        let url = try url()
        var options = LinkListItemOptions()
        for field in Self.imageOptionFields {
            guard let text = try request.optionalString(field) else { continue }
            do {
                try options.set(field, to: text)
            } catch {
                throw .invalidArgument(field: field, reason: error.reason)
            }
        }
        var image = services.downloader.request(for: url, chosenKey: options.key, owner: request.peer.uid, sha256: options.sha256)
        image.refresh = options.refresh
        if let value = request.value("mirrors"), value != .null {
            do {
                image.mirrors = try Self.mirrors(value)
            } catch {
                throw .invalidArgument(field: "mirrors", reason: error.reason)
            }
        }
        return image
    }

    /// The `refresh` argument (`off`, `respect-headers` or a duration), or nil.
    func refreshRule() throws(ControlError) -> RefreshRule? {
        guard let text = try request.optionalString("refresh") else { return nil }
        do {
            return try RefreshRule(parsing: text)
        } catch {
            throw .invalidArgument(field: "refresh", reason: "\(error)")
        }
    }

    func hello() -> JSONValue {
        ["protocol": 1, "version": .string(ImgdVersion.string), "features": JSONValue(Self.features)]
    }
}
