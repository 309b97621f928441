import ImgdCore
import ImgdNetwork
import ImgdStore
import Logging

extension DaemonServices {
    /// SIGHUP: reads the configuration again and applies the settings declared reloadable
    /// (``ConfigReload``); the others keep their running value until a restart.
    func reload() async {
        notifier.reloading()
        defer { notifier.ready(status: statusLine()) }
        let new: DaemonConfig
        do {
            new = try options.load()
        } catch {
            logger.error("reload failed, keeping the running configuration: \(error)")
            return
        }
        // With the new cap, and also when nothing changed: a reload after freeing space checks again.
        defer { checkDiskSpace() }
        let reload = ConfigReload(running: config.withLock { $0 }, loaded: new)
        let applied = reload.applied
        // First, so that the reload's own lines follow the new level. Shared by every copy of the
        // daemon's handler: each part's logger takes it at once.
        var logger = logger
        logger.logLevel = applied.logLevel
        config.withLock { $0 = applied }
        maintainer.update(applied.maintenance, diskLimit: applied.diskLimit)
        memory.setLimits(bytes: applied.memoryLimit, entries: memory.statistics.limitEntries)
        downloader.update(policy: applied.downloadPolicy)
        downloader.update(keyPolicy: applied.keyPolicy)
        downloader.update(refresh: applied.refreshPolicy)
        await spool.update(limits: applied.spoolLimits)
        await spool.update(warming: applied.warmingLimits)
        // Once every part has the new values: whoever reads "reloaded: refresh = 1d" and then
        // asks for an image gets the new rule, not the old one.
        for message in reload.messages { logger.log(level: message.level, "\(message.text)") }
        // A raised max-parallel may need more descriptors than the start checked for.
        let budget = DescriptorBudget(config: applied), limit = DescriptorBudget.raiseLimit()
        if budget.needed > limit {
            logger.warning("""
                max-parallel \(applied.maxParallel) with max-connections \(applied.maxConnections) needs \(budget.needed) file \
                descriptors, but the limit is \(limit) (RLIMIT_NOFILE): connections or downloads may fail with \
                "too many open files"; lower max-parallel or raise the limit
                """)
        }
    }

    /// Compares the cap with the cache's filesystem (at start and at each reload), logs a cap it
    /// cannot honour as a warning, and keeps it for `status.degraded`.
    func checkDiskSpace() {
        let found = disk.spaceShortfall()
        let old = spaceShortfall.withLock { shortfall in
            defer { shortfall = found }
            return shortfall
        }
        if let found {
            logger.warning("degraded: \(found)")
        } else if old != nil {
            logger.info("recovered: \(DiskSpaceShortfall.code) cleared")
        }
    }

    /// What `status.degraded` lists: the disk tier's faults, and a cap its filesystem cannot honour.
    var degradations: [(code: String, message: String)] {
        var all = maintainer.status.faults.map { (code: $0.code, message: "\($0)") }
        if let shortfall = spaceShortfall.withLock({ $0 }) { all.append((shortfall.code, "\(shortfall)")) }
        return all
    }

    /// "warming 1234/5000 in 2 lists; cache 812 MiB of 1 GiB" ("in 16 lists, 3 waiting" beyond the cap).
    func statusLine() -> String {
        let progress = spool.progress
        let budget = disk.budget.snapshot
        let cache = "cache \(ByteCount(budget.stored)) of \(ByteCount(budget.limit))"
        let faults = degradations
        let degraded = faults.isEmpty ? "" : "; degraded: " + faults.map(\.code).joined(separator: ", ")
        guard progress.lists > 0 else { return "idle; \(cache)\(degraded)" }
        let (lists, waiting) = (progress.lists - progress.waiting, progress.waiting > 0 ? ", \(progress.waiting) waiting" : "")
        return "warming \(progress.settled)/\(progress.total) in \(lists) list\(lists == 1 ? "" : "s")\(waiting); \(cache)\(degraded)"
    }
}
