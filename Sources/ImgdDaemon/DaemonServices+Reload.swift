import ImgdCore
import ImgdNetwork
import ImgdStore
import Logging

extension DaemonServices {
    /// SIGHUP and the `reload` command: reads the configuration again and applies the settings
    /// declared reloadable (``ConfigReload``); the others keep their running value until a
    /// restart. Reloads run one at a time, in the order asked (a SIGHUP may come while `imgctl
    /// reload` runs): each waits for the one before it.
    ///
    /// Returns what the reload logged (`reloaded: disk-limit = 3 MiB`, `… needs a restart`), or
    /// throws ``ReloadFailure`` when the configuration no longer loads: the running settings stay,
    /// and `status.degraded` says so until a reload succeeds.
    @discardableResult
    func reload() async throws(ReloadFailure) -> [String] {
        let turn = reloads.withLock { last in
            let previous = last
            // Owned by `reloads`: the chain's last link, awaited by whoever asked for it.
            let next = Task { () -> Result<[String], ReloadFailure> in
                _ = await previous?.value
                return await self.reloadNow()
            }
            last = next
            return next
        }
        return try await turn.value.get()
    }

    /// One reload, with no other running.
    private func reloadNow() async -> Result<[String], ReloadFailure> {
        notifier.reloading()
        defer { notifier.ready(status: statusLine()) }
        let new: DaemonConfig
        do {
            new = try options.load()
        } catch {
            let failure = ReloadFailure(cause: "\(error)")
            reloadFailure.withLock { $0 = failure }
            logger.error("\(failure)")
            return .failure(failure)
        }
        let cleared = reloadFailure.withLock { failure in
            defer { failure = nil }
            return failure != nil
        }
        if cleared {
            logger.info("recovered: \(ReloadFailure.code) cleared")
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
        // A lowered quota evicts its users down at once (a pass over every owner).
        disk.setQuotas(applied.userQuotas)
        memory.setLimits(bytes: applied.memoryLimit, entries: memory.statistics.limitEntries)
        // The top-level caps with the window's laid over them: a reload does not undo a window.
        windows.update(schedule: applied.windows, base: applied.downloadPolicy)
        courtesy.update(enabled: applied.courtesy, threshold: applied.courtesyThreshold, files: applied.courtesyPressure)
        downloader.update(keyPolicy: applied.keyPolicy)
        downloader.update(refresh: applied.refreshPolicy)
        await spool.update(limits: applied.spoolLimits)
        await spool.update(warming: applied.warmingLimits)
        readiness.update(fraction: applied.readyFraction)
        // Once every part has the new values: whoever reads "reloaded: refresh = 1d" and then
        // asks for an image gets the new rule, not the old one.
        for message in reload.messages { logger.log(level: message.level, "\(message.text)") }
        var told = reload.messages.map(\.text)
        // A raised max-parallel may need more descriptors than the start checked for.
        let budget = DescriptorBudget(config: applied), limit = DescriptorBudget.raiseLimit()
        if budget.needed > limit {
            let warning = """
                max-parallel \(applied.maxParallel) with max-connections \(applied.maxConnections) needs \(budget.needed) file \
                descriptors, but the limit is \(limit) (RLIMIT_NOFILE): connections or downloads may fail with \
                "too many open files"; lower max-parallel or raise the limit
                """
            logger.warning("\(warning)")
            told.append(warning)
        }
        return .success(told)
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

    /// What `status.degraded` lists: the disk tier's faults, a cap its filesystem cannot honour,
    /// and a reload that failed (until one succeeds).
    var degradations: [(code: String, message: String)] {
        var all = maintainer.status.faults.map { (code: $0.code, message: "\($0)") }
        if let shortfall = spaceShortfall.withLock({ $0 }) { all.append((shortfall.code, "\(shortfall)")) }
        if let failure = reloadFailure.withLock({ $0 }) { all.append((ReloadFailure.code, "\(failure)")) }
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
