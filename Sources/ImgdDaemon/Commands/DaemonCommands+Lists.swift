import ImgdCore
import ImgdNetwork
import ImgdProtocol
import ImgdStore
import Logging

extension DaemonCommands {
    /// Whether this peer may cancel or retry a list dropped by `owner` (nil: not recorded): its
    /// own list, or any as root, imgd's own user or a member of `admin-group`.
    var mayActOnList: @Sendable (_ owner: UInt32?) -> Bool {
        let authority = authority, peer = request.peer
        return { owner in (owner != nil && owner == peer.uid && peer != .unknown) || authority.isPrivileged(peer) }
    }

    /// The `forbidden` error (logged with the peer) for `verb` (`cancel`, `retry`) of the list
    /// `name` that `owner` dropped. The name is the client's text: the reply cuts it, the log
    /// escapes it.
    func refusal(_ verb: String, list name: String, owner: UInt32?) -> ControlError {
        let peer = request.peer
        peerLogger.forList(name).notice("refused \(verb) of the list: forbidden")
        let whose = owner.map { "uid \($0)" } ?? "a user not recorded"
        let acting = verb == "cancel" ? "cancelling" : "retrying"
        return .forbidden(
            "list \(EchoedText.cut(name)) was dropped by \(whose); \(acting) another user's list is allowed only to "
                + "\(authority.allowed); \(CommandAuthority.describe(peer)) is none of these")
    }

    /// `lists`: the lists in progress and the last finished ones, from the state database.
    func lists() async throws(ControlError) -> JSONValue {
        let spool = services.spool
        let records = try await fromStateDatabase("reading the lists") { () throws(SQLiteError) in try spool.lists() }
        return ["lists": .array(records.map(Self.json))]
    }

    func cancel() async throws(ControlError) -> JSONValue {
        if let name = try request.optionalString("list") {
            // Its own list anyone may cancel; another user's only the privileged.
            let spool = services.spool, mayActOnList = mayActOnList
            let outcome = try await fromStateDatabase("cancelling list \(EchoedText.cut(name))") { () async throws(SQLiteError) in
                try await spool.cancel(list: name, if: mayActOnList)
            }
            switch outcome {
            case .cancelled(let pending):
                logChange("cancel: list \(EchoedText.cut(name))")
                return ["cancelled": JSONValue(pending)]
            case .notFound:
                throw .notFound("no list in progress is named \(EchoedText.cut(name))")
            case .forbidden(let owner):
                throw refusal("cancel", list: name, owner: owner)
            }
        }
        let url = try url()
        // 1 when a download of the URL was queued, running or waiting for a retry; 0 when none was.
        // A member's cancel stops that member's requests only (their gets, adds and lists' items);
        // the privileged's stops everyone's.
        let cancelled = await services.downloader.cancelDownload(of: url, caller: cancellingCaller)
        logChange("cancel: \(EchoedText.cut(url.normalized))\(cancelled ? "" : ", nothing to cancel")")
        return ["cancelled": cancelled ? 1 : 0]
    }

    /// Failures in pages of `limit` (default and most 1,000), from `after` (a cursor from an
    /// earlier page's `next`); `next` is null on the last page.
    func failed() async throws(ControlError) -> JSONValue {
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
            let spool = services.spool
            let found = try await fromStateDatabase("reading the failures of list \(EchoedText.cut(name))") { () throws(SQLiteError) in
                try spool.failures(list: name, afterSeq: seq, limit: limit + 1)
            }
            guard let page = found else {
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

    func retry() async throws(ControlError) -> JSONValue {
        if let name = try request.optionalString("list") {
            // One's own list anyone may retry; another user's only the privileged (a retry takes a
            // turn among the lists warmed and asks that user's hosts again).
            let spool = services.spool, mayActOnList = mayActOnList
            let outcome = try await fromStateDatabase("retrying list \(EchoedText.cut(name))") { () async throws(SQLiteError) in
                try await spool.retry(list: name, if: mayActOnList)
            }
            switch outcome {
            case .requeued(let requeued, let expired):
                logChange("retry: list \(EchoedText.cut(name)), \(requeued) URLs")
                guard expired > 0 else { return ["requeued": JSONValue(requeued)] }
                // Not requeued: the origin would refuse them again; only a re-signed URL helps.
                return [
                    "requeued": JSONValue(requeued), "expired": JSONValue(expired),
                    "message": .string(
                        "\(expired) URLs failed url_expired and were not requeued: retrying cannot help them; "
                            + "re-sign them (the list's report lists them under \"expired\") and drop them again"),
                ]
            case .notFound:
                throw .notFound("no list is named \(EchoedText.cut(name))")
            case .forbidden(let owner):
                throw refusal("retry", list: name, owner: owner)
            }
        }
        if request.value("url") != nil {
            let url = try url()
            let limit = heldLimit
            services.downloader.forgetFailures(of: url)
            guard services.downloader.prefetch(
                [services.downloader.request(for: url)], submitter: .interactive, priority: .prefetch, limit: limit,
                caller: request.peer.uid, handler: outcomeReporter())
            else { throw queueFull(limit, adding: 1, bytes: url.normalized.utf8.count) }
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


    static func json(_ record: ListRecord) -> JSONValue {
        var object: [String: JSONValue] = [
            "name": .string(record.name), "state": .string(record.state.rawValue), "total": JSONValue(record.total),
            "cached": JSONValue(record.cached), "already_cached": JSONValue(record.alreadyCached),
            "failed": JSONValue(record.failed), "pending": JSONValue(record.pending), "bytes": JSONValue(record.bytes),
            "claimed_at": JSONValue(record.claimedAt), "format": .string(record.format),
        ]
        // Only a list waiting for its turn has a place in the queue.
        if let position = record.position { object["position"] = JSONValue(position) }
        if !record.heldFor.isEmpty { object["window"] = JSONValue(record.heldFor) }
        // A deadline: when; while warmed, the estimate; once finished, whether it was met.
        if let readyBy = record.readyBy {
            object["ready_by"] = JSONValue(readyBy)
            if let met = record.deadlineMet {
                object["deadline_met"] = .bool(met)
            } else {
                object["eta"] = record.estimate?.eta.map { JSONValue($0) } ?? .null
                object["at_risk"] = .bool(record.estimate?.atRisk ?? (WallClock.nowMilliseconds() >= readyBy))
                object["boosted"] = .bool(record.estimate?.boosted ?? false)
            }
        }
        return .object(object)
    }
}
