import ImgdCore
import ImgdNetwork
import ImgdProtocol
import ImgdStore

/// `explain {url, key?}`: why a URL is or is not cached, in one reply (Protocol.md, *explain*).
///
/// The key and how it was derived, the index entry, the memory tier (looked at, not used), and
/// what the engine knows — a job under way, a remembered failure, the host's slots, queue and
/// hold, the address policy's verdict, the tier route and the key's last outcomes — from one
/// command to the engine (``Downloader/explain(_:url:)``).
///
/// A member learns nothing here that `get`, `failed`, `lists` and the events do not tell them:
/// a `key` is always in the asker's own namespace; the entry's own URL (which may be another
/// signed form of the URL, with another member's signature) is not shown, nor a redirect's
/// target beyond its host, nor a host's configured headers (only that it has some); how many
/// requests wait for a download is shown to the privileged only.
extension DaemonCommands {
    func explain() async throws(ControlError) -> JSONValue {
        let url = try url()
        let chosen = try request.optionalString("key")
        if let chosen {
            var options = LinkListItemOptions()
            do {
                try options.set("key", to: chosen)
            } catch {
                throw .invalidArgument(field: "key", reason: error.reason)
            }
        }
        let downloader = services.downloader
        var result: [String: JSONValue] = ["url": .string(url.normalized)]
        let key: CacheKey
        let derivation = downloader.keyPolicy.derivation(for: url)
        if let chosen {
            let owner = request.peer.uid
            key = CacheKey(chosen: chosen, owner: owner)
            result["key"] = [
                "key": .string(key.hex), "from": "chosen", "chosen": .string(chosen), "namespace": .string("uid \(owner)"),
            ]
        } else {
            key = derivation.key
            result["key"] = [
                "key": .string(key.hex), "from": "url", "keyed_url": .string(derivation.keyedURL),
                "host_rule": derivation.hostPattern.map(JSONValue.string) ?? .null,
                "ignore_query": JSONValue(derivation.ignoredPatterns), "ignored": JSONValue(derivation.droppedParameters),
            ]
        }
        let now = WallClock.nowMilliseconds()
        if let found = services.disk.lookup(key) {
            result["entry"] = Self.json(entry: found.entry, refresh: downloader.refreshPolicy, now: now)
        } else {
            result["entry"] = .null
        }
        result["memory"] = .bool(services.memory.contains(key))
        let engine = await downloader.explain(key, url: url)
        result["failure"] = engine.failure.map { failure in
            ["code": .string(failure.error.code), "message": .string(failure.error.message), "until": JSONValue(failure.until)]
        } ?? .null
        result["download"] = engine.download.map { Self.json($0, showWaiters: authority.isPrivileged(request.peer)) } ?? .null
        result["host"] = Self.json(engine.host)
        result["queue"] = ["queued": JSONValue(engine.queued), "running": JSONValue(engine.running), "max_parallel": JSONValue(engine.maxParallel)]
        result["address"] = Self.addressJSON(engine)
        if let through = engine.tierURL {
            result["tier"] = ["url": .string(through)]
        } else {
            result["tier"] = .null
            if let reason = engine.tierBypass { result["tier_bypass"] = .string(reason) }
        }
        result["outcomes"] = .array(engine.outcomes.map(Self.json))
        if !engine.engineRunning { result["engine"] = "stopped" }
        return .object(result)
    }

    static func json(entry: IndexEntry, refresh: RefreshPolicy, now: Int) -> JSONValue {
        let dueAt = entry.freshness.dueAt(under: refresh.rule, minFresh: refresh.minFresh)
        var object: [String: JSONValue] = [
            "bytes": JSONValue(entry.bytes), "sha256": .string(entry.sha256.hex), "format": .string(entry.format.rawValue),
            "width": entry.width.map { JSONValue($0) } ?? .null, "height": entry.height.map { JSONValue($0) } ?? .null,
            "fetched_at": JSONValue(entry.fetchedAt), "last_access": JSONValue(entry.lastAccess),
            "hit_count": JSONValue(entry.hitCount), "validated_at": JSONValue(entry.freshness.validatedAt),
            "pinned": .bool((entry.pinnedUntil ?? 0) > now),
            "pinned_until": entry.pinnedUntil.map { JSONValue($0) } ?? .null,
            "needs_verification": .bool(entry.needsVerification),
            "due": .bool(refresh.isDue(entry.freshness, now: now)),
            // An entry due at every use (no-cache) is due from the beginning of time: shown as 0.
            "due_at": dueAt.map { JSONValue(max(0, $0)) } ?? .null,
            "refresh": .string(refresh.rule.description),
        ]
        if let etag = entry.etag { object["etag"] = .string(etag) }
        return .object(object)
    }

    static func json(_ download: EngineExplanation.Download, showWaiters: Bool) -> JSONValue {
        var object: [String: JSONValue] = [
            "state": .string(download.state), "priority": .string(download.priority), "revalidation": .bool(download.revalidation),
            "attempts": JSONValue(download.attempts), "preemptions": JSONValue(download.preemptions), "since": JSONValue(download.since),
        ]
        if showWaiters { object["waiters"] = JSONValue(download.waiters) }
        if let at = download.retryAt { object["retry_at"] = JSONValue(at) }
        if let bytes = download.bytesReceived { object["bytes_received"] = JSONValue(bytes) }
        if let declared = download.declaredBytes { object["declared_bytes"] = JSONValue(declared) }
        if let since = download.runningSince { object["running_since"] = JSONValue(since) }
        if let tier = download.viaTier { object["via"] = .string(tier ? "tier" : "origin") }
        if download.throttled { object["throttled"] = true }
        if download.waitingForRoom { object["waiting_for_room"] = true }
        if let host = download.pendingHopHost { object["pending_hop_host"] = .string(host) }
        return .object(object)
    }

    static func json(_ host: EngineExplanation.Host) -> JSONValue {
        [
            "host": .string(host.hostKey), "running": JSONValue(host.running), "cap": JSONValue(host.cap), "queued": JSONValue(host.queued),
            "rate_interval_ms": host.rateIntervalMilliseconds.map { JSONValue($0) } ?? .null,
            "held_until": host.heldUntil.map { JSONValue($0) } ?? .null, "held_by": host.heldBy.map(JSONValue.string) ?? .null,
            "rule": host.rulePattern.map(JSONValue.string) ?? .null, "headers": .bool(host.sendsHeaders),
        ]
    }

    static func addressJSON(_ engine: EngineExplanation) -> JSONValue {
        if let refusal = engine.addressRefusal {
            return ["verdict": "refused", "range": .string(refusal.range.description), "reason": .string(refusal.description)]
        }
        if engine.hostIsAddress { return ["verdict": "allowed"] }
        // A name is resolved by libcurl at each connect (or by the proxy or tier): each address
        // it connects to is checked then; nothing is resolved here.
        return ["verdict": "checked_at_connect"]
    }

    static func json(_ record: OutcomeRecord) -> JSONValue {
        var object: [String: JSONValue] = [
            "at": JSONValue(record.at), "kind": .string(record.kind.rawValue), "took_ms": JSONValue(record.durationMilliseconds),
            "attempts": JSONValue(record.attempts), "via": .string(record.viaTier ? "tier" : "origin"), "cause": .string(record.cause.rawValue),
        ]
        if let code = record.code {
            object["code"] = .string(record.httpStatus.map { FailureCode.http(status: $0) } ?? code.rawValue)
        }
        if record.kind == .fetched || record.kind == .revalidated { object["bytes"] = JSONValue(record.bytes) }
        return .object(object)
    }
}
