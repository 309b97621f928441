import ImgdCore
import ImgdNetwork
import ImgdProtocol
import ImgdStore
import Logging

#if canImport(Glibc)
import Glibc
#endif

extension DaemonCommands {
    func status() -> JSONValue {
        let config = services.config.withLock { $0 }
        let budget = services.disk.budget.snapshot
        let downloads = services.downloader.statistics
        // The events counted before the memory tier is read: an event is counted after its
        // purge, so a status that counts it shows the tier purged (read the other way round, a
        // purge between the two reads showed the event with the memory it emptied).
        let pressureEvents = services.pressure.eventsHandled
        let memory = services.memory.statistics
        let totals = (try? services.disk.index.totals()) ?? (entries: 0, bytes: 0)
        let pinned = (try? services.disk.index.pinnedBytes(now: WallClock.nowMilliseconds())) ?? 0
        let lists = services.spool.progress
        let pressureSource = services.pressure.monitor.activeSource
        let window = services.windows.snapshot
        return [
            "version": .string(ImgdVersion.string), "pid": JSONValue(getpid()),
            "uptime_s": JSONValue(Double((ContinuousClock.now - services.startedAt).components.seconds)),
            "queued": JSONValue(downloads.queued + downloads.waitingRetry), "in_flight": JSONValue(downloads.running),
            "held": JSONValue(services.downloader.heldRequests), "held_bytes": JSONValue(services.downloader.heldRequestBytes),
            "lists_active": JSONValue(lists.warmed), "lists_waiting": JSONValue(lists.waiting), "spool": .string(config.spool),
            "cache": [
                "bytes": JSONValue(budget.stored), "entries": JSONValue(totals.entries), "limit": JSONValue(budget.limit),
                "pinned_bytes": JSONValue(pinned), "path": .string(config.cache),
            ],
            "memory": [
                "bytes": JSONValue(memory.bytes), "entries": JSONValue(memory.entries), "limit": JSONValue(memory.limitBytes),
                "pressure_source": .string(pressureSource.code), "pressure_path": pressureSource.path.map { .string($0) } ?? .null,
            ],
            "pressure_events": JSONValue(pressureEvents),
            // In force: a calendar window's, else the setting's.
            "max_rate": window.policy.maxRate.map { JSONValue($0) } ?? .null,
            "max_rate_applies_to": .string(config.maxRateAppliesTo.rawValue),
            "throttled_now": JSONValue(downloads.throttledNow),
            "degraded": .array(services.degradations.map { ["code": .string($0.code), "message": .string($0.message)] }),
            "ready": services.readiness.snapshot().json,
            "window": CalendarWindows.json(window.position, policy: window.policy),
            "courtesy": services.courtesy.json,
            "users": users(),
        ]
    }

    func stats() -> JSONValue {
        let downloads = services.downloader.statistics
        let memory = services.memory.statistics
        let counters = services.counters.values
        let evictions = services.disk.evictions
        let evicted = [EvictionReason.size, .space, .command, .quota].reduce(0) { $0 + evictions.total($1).files }
        return [
            "downloads": JSONValue(downloads.succeeded), "download_bytes": JSONValue(downloads.bytesDownloaded),
            "download_failures": JSONValue(downloads.failed), "retries": JSONValue(downloads.retries),
            "failures": .object(counters.failuresByCode.mapValues { JSONValue($0) }),
            "coalesced": JSONValue(downloads.coalesced), "revalidated": JSONValue(downloads.revalidated), "cancelled": JSONValue(downloads.cancelled),
            "preempted": JSONValue(downloads.preempted), "paced_out": JSONValue(downloads.pacedOut),
            "throttled": JSONValue(downloads.throttled),
            "tier_fallbacks": JSONValue(downloads.tierFallbacks),
            "memory": ["hits": JSONValue(memory.hits), "misses": JSONValue(memory.misses), "purges": JSONValue(memory.purges)],
            "disk": [
                "hits": JSONValue(counters.diskHits), "misses": JSONValue(counters.misses),
                "evicted": JSONValue(evicted), "expired": JSONValue(evictions.total(.age).files),
            ],
            "gets": JSONValue(counters.gets), "pressure_events": JSONValue(services.pressure.eventsHandled),
            "events_dropped": JSONValue(services.events.droppedCount),
        ]
    }
}
