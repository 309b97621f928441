import ImgdCore
import ImgdNetwork
import ImgdProtocol
import ImgdStore

#if canImport(Glibc)
import Glibc
#endif

/// The `metrics` snapshot (Protocol.md, `metrics`) and its Prometheus text, for the control
/// command and the HTTP face's `GET /metrics`. Cheap to ask often: every gauge is read live from
/// atomics and small locks except the two that query the index (``GaugeCache``, at most once a
/// second), so a scrape never holds up lookups.
extension DaemonServices {
    /// `{"counters": <stats>, "gauges", "histograms", "info"}`.
    func metricsSnapshot() -> JSONValue {
        let config = self.config.withLock { $0 }
        let budget = disk.budget.snapshot
        let downloads = downloader.statistics
        let memory = self.memory.statistics
        let lists = spool.turnCounts
        let expensive = gaugeCache.value {
            GaugeCache.Expensive(
                diskEntries: (try? disk.index.totals())?.entries ?? 0,
                pinnedBytes: (try? disk.index.pinnedBytes(now: WallClock.nowMilliseconds())) ?? 0)
        }
        var gauges: [String: JSONValue] = [
            "uptime_seconds": JSONValue(Double((ContinuousClock.now - startedAt).components.seconds)),
            "downloads_queued": JSONValue(downloads.queued + downloads.waitingRetry),
            "downloads_in_flight": JSONValue(downloads.running),
            "requests_held": JSONValue(downloader.heldRequests), "requests_held_bytes": JSONValue(downloader.heldRequestBytes),
            "lists_active": JSONValue(lists.warmed), "lists_waiting": JSONValue(lists.waiting),
            "stored_bytes": ["disk": JSONValue(budget.stored), "memory": JSONValue(memory.bytes)],
            "stored_entries": ["disk": JSONValue(expensive.diskEntries), "memory": JSONValue(memory.entries)],
            "limit_bytes": ["disk": JSONValue(budget.limit), "memory": JSONValue(memory.limitBytes)],
            "pinned_bytes": JSONValue(expensive.pinnedBytes),
            "transfers_throttled": JSONValue(downloads.throttledNow),
        ]
        if config.maxRate > 0 { gauges["max_rate_bytes_per_second"] = JSONValue(config.maxRate) }
        let counters = DaemonCommands(services: self, request: ControlRequest(command: "stats")).stats()
        return [
            "counters": counters,
            "gauges": .object(gauges),
            "histograms": histogramsJSON(),
            "info": [
                "version": .string(ImgdVersion.string),
                "pressure_source": .string(pressure.monitor.activeSource.code),
                "max_rate_applies_to": .string(config.maxRateAppliesTo.rawValue),
                "degraded": .array(degradations.map { .string($0.code) }),
            ],
        ]
    }

    /// ``metricsSnapshot()`` in Prometheus' text format (version 0.0.4), as `imgctl stats
    /// --prometheus` prints it. May read the index (at most once a second): call it from a
    /// task, not from an event loop.
    func metricsText() -> String {
        PrometheusExposition.render(metricsSnapshot())
    }

    private func histogramsJSON() -> JSONValue {
        let bounds = JSONValue.array(DurationHistogram.boundsSeconds.map { .double($0) })
        var gets: [JSONValue] = []
        for face in DaemonHistograms.Face.allCases {
            for source in DaemonHistograms.Source.allCases {
                gets.append(Self.series(histograms.getDuration(face: face, source: source), labels: ["face": face.label, "source": source.label]))
            }
        }
        let transfers = downloader.transferDurations
        return [
            "get_duration_seconds": ["bounds": bounds, "series": .array(gets)],
            "transfer_duration_seconds": [
                "bounds": bounds,
                "series": [
                    Self.series(transfers.ok, labels: ["result": "ok"]), Self.series(transfers.failed, labels: ["result": "failed"]),
                ],
            ],
        ]
    }

    private static func series(_ histogram: DurationHistogram, labels: [String: String]) -> JSONValue {
        let snapshot = histogram.snapshot()
        return [
            "labels": .object(labels.mapValues { .string($0) }),
            "counts": .array(snapshot.counts.map { JSONValue(Int(truncatingIfNeeded: $0)) }),
            "sum": .double(snapshot.sumSeconds),
        ]
    }
}
