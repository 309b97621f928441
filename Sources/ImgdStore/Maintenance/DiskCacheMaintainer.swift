import ImgdCore
import Logging
import ServiceLifecycle

/// Keeps a running disk tier within its limits and in good health: the service that owns the
/// cache's housekeeping while imgd runs.
///
/// - At start, and every ``MaintenanceSettings/sweepInterval``: removes entries unused for
///   longer than ``MaintenanceSettings/maxAge``; whenever more is stored than the cap allows (the
///   limit was lowered), evicts least recently used entries down to the low-water mark.
/// - Every ``MaintenanceSettings/accessFlushInterval``: writes batched access times.
/// - Every ``MaintenanceSettings/healthInterval``: ``DiskCache/checkHealth()``, reporting a
///   fault once when it appears and once when it clears.
/// - From start until done: the background reconcile, a slice at a time.
///
/// An actor on the cache's ``DiskCache/housekeeping`` executor: its work blocks (SQLite,
/// `unlink`, `fstatat`) and so runs there, never on the cooperative pool, and it takes turns
/// with the room made for arriving bodies. Every piece of work is a budgeted pass (at most 500
/// rows or files) with a pause between passes, which frees the executor: lookups run beside it
/// on their own connection and never wait for a whole sweep, and a body waiting for room waits
/// for one pass at most. Ages are read on `now` (by default ``WallClock``, which a clock step
/// cannot move); timers use the monotonic clock.
public actor DiskCacheMaintainer: Service {
    /// The disk tier looked after.
    public nonisolated let cache: DiskCache
    private let now: @Sendable () -> Int
    private let logger: Logger
    /// Settings, status and a pending sweep request: read and written outside the actor too
    /// (status lines, reloads, tests), so they sit behind their own lock.
    private nonisolated let state: Locked<MaintainerState>

    public nonisolated var unownedExecutor: UnownedSerialExecutor { cache.housekeeping.asUnownedSerialExecutor() }

    /// A maintainer of `cache`; `now` gives wall-clock milliseconds (tests inject theirs), and
    /// `log` takes one line per event worth a person's attention.
    public init(
        cache: DiskCache, settings: MaintenanceSettings = MaintenanceSettings(),
        now: @escaping @Sendable () -> Int = WallClock.nowMilliseconds,
        logger: Logger = Logger(label: "imgd", factory: { _ in SwiftLogNoOpLogHandler() })
    ) {
        self.cache = cache
        self.now = now
        self.logger = logger
        state = Locked(MaintainerState(settings: settings))
    }

    /// What the maintainer has done and found.
    public nonisolated var status: MaintenanceStatus { state.withLock { $0.status } }

    /// The settings in use.
    public nonisolated var settings: MaintenanceSettings { state.withLock { $0.settings } }

    /// Takes new settings and a new cap (a reload); the next tick applies them: a lower cap is
    /// enforced within a second, a shorter maximum age at once.
    public nonisolated func update(_ settings: MaintenanceSettings, diskLimit: Int) {
        cache.budget.setLimit(diskLimit)
        state.withLock { state in
            if state.settings.maxAge != settings.maxAge { state.sweepRequested = true }
            state.settings = settings
        }
    }

    /// Asks for an age sweep at the next tick.
    public nonisolated func requestSweep() {
        state.withLock { $0.sweepRequested = true }
    }

    /// Runs until the calling task is cancelled or its service group shuts down gracefully;
    /// writes pending access times before returning.
    public func run() async {
        await cancelWhenGracefulShutdown { await self.maintain() }
    }

    /// The upkeep loop, until the calling task is cancelled.
    private func maintain() async {
        let clock = ContinuousClock()
        var cursor = ReconcileCursor()
        var nextSweep = clock.now
        var nextFlush = clock.now
        var nextHealth = clock.now
        while !Task.isCancelled {
            let settings = self.settings
            let tick = clock.now
            if tick >= nextHealth {
                checkHealth()
                nextHealth = tick + settings.healthInterval
            }
            if tick >= nextSweep || state.withLock({ $0.takeSweepRequest() }) {
                await sweepExpired(settings: settings)
                nextSweep = tick + settings.sweepInterval
            }
            if cache.budget.snapshot.stored > cache.budget.snapshot.limit {
                await enforceLimit(settings: settings)
            }
            if tick >= nextFlush {
                flushAccesses()
                nextFlush = tick + settings.accessFlushInterval
            }
            if !cursor.isFinished {
                cursor = reconcileSlice(cursor, settings: settings)
            }
            do {
                try await Task.sleep(for: cursor.isFinished ? .seconds(1) : settings.pause)
            } catch {
                break
            }
        }
        flushAccesses()
    }

    // MARK: - Work, each step a bounded pass

    /// Removes entries idle for longer than the maximum age, pass after pass.
    @discardableResult
    public func sweepExpired(settings: MaintenanceSettings) async -> EvictionPass {
        let cutoff = now() - Int(settings.maxAge.components.seconds) * 1000
        var total = EvictionPass()
        while !Task.isCancelled {
            let pass = self.pass("age sweep") { () throws(SQLiteError) in try self.cache.evictExpired(accessedBefore: cutoff, now: self.now()) }
            total.files += pass.files
            total.bytes += pass.bytes
            if !pass.isIncomplete { break }
            try? await Task.sleep(for: settings.pause)
        }
        state.withLock { state in
            state.status.expiredEntries += total.files
            state.status.sweeps += 1
            state.status.lastSweepAt = now()
        }
        if total.files > 0 {
            logger.info("removed \(total.files) entries (\(ByteCount(total.bytes))) unused for longer than \(settings.maxAge.formattedAge)")
        }
        return total
    }

    /// When more is stored than the cap allows, evicts least recently used entries down to the
    /// low-water mark (pinned entries stay, even if that leaves the cache over its cap).
    @discardableResult
    public func enforceLimit(settings: MaintenanceSettings) async -> EvictionPass {
        let before = cache.budget.snapshot
        guard before.stored > before.limit else { return EvictionPass() }
        let target = Int(Double(before.limit) * settings.lowWater)
        var total = EvictionPass()
        while !Task.isCancelled {
            let excess = cache.budget.snapshot.stored - target
            guard excess > 0 else { break }
            let pass = pass("eviction") { () throws(SQLiteError) in try cache.evictLeastRecentlyUsed(toFree: excess, now: now()) }
            total.files += pass.files
            total.bytes += pass.bytes
            if pass.files == 0 { break }  // the rest is pinned
            try? await Task.sleep(for: settings.pause)
        }
        state.withLock { $0.status.evictedEntries += total.files }
        logger.info("the cache held \(ByteCount(before.stored)), over its \(ByteCount(before.limit)) limit: evicted \(total.files) entries (\(ByteCount(total.bytes)))")
        return total
    }

    /// Runs one index operation, turning a failure into a logged fault (the next tick tries again).
    private func pass(_ what: String, _ body: () throws(SQLiteError) -> EvictionPass) -> EvictionPass {
        do {
            return try body()
        } catch {
            logger.info("\(what) failed: \(error)")
            return EvictionPass()
        }
    }

    private func flushAccesses() {
        do {
            try cache.index.flushAccesses()
        } catch {
            logger.info("cannot write access times: \(error)")
        }
    }

    private func reconcileSlice(_ cursor: ReconcileCursor, settings: MaintenanceSettings) -> ReconcileCursor {
        var cursor = cursor
        do {
            let report = try cache.reconcile(&cursor, budget: settings.reconcileSlice, now: now())
            let finished = cursor.isFinished
            let total = state.withLock { state in
                state.status.reconcile.rowsWithoutFile += report.rowsWithoutFile
                state.status.reconcile.filesWithoutRow += report.filesWithoutRow
                state.status.reconcileFinished = finished
                return state.status.reconcile
            }
            if finished, total.rowsWithoutFile + total.filesWithoutRow > 0 {
                logger.info("reconcile done: removed \(total.rowsWithoutFile) rows without a file and \(total.filesWithoutRow) files without a row")
            }
        } catch {
            logger.info("reconcile failed: \(error); trying again later")
        }
        return cursor
    }

    private func checkHealth() {
        let health = cache.checkHealth()
        if health.recreatedFolder { logger.info("the cache folder \(cache.directory.root) was removed; created it again (empty)") }
        let (appeared, cleared) = state.withLock { state in
            let old = state.status.faults
            state.status.faults = health.faults
            if health.recreatedFolder { state.status.folderRecreations += 1 }
            return (health.faults.filter { !old.contains($0) }, old.filter { !health.faults.contains($0) })
        }
        for fault in appeared { logger.info("degraded: \(fault)") }
        for fault in cleared { logger.info("recovered: \(fault.code) cleared") }
    }
}

/// What a ``DiskCacheMaintainer`` has done and found so far.
public struct MaintenanceStatus: Sendable, Equatable {
    /// Faults now (the daemon is degraded while any holds).
    public var faults: [DiskCacheFault] = []
    /// Entries removed by the age sweep.
    public var expiredEntries = 0
    /// Entries this maintainer evicted: more was stored than the cap allows, or a purge. Every
    /// eviction, whoever made it (a reservation at admission, too), is in ``DiskCache/evictions``.
    public var evictedEntries = 0
    /// Age sweeps run.
    public var sweeps = 0
    /// When the last age sweep ran (wall-clock milliseconds).
    public var lastSweepAt: Int?
    /// What the background reconcile removed.
    public var reconcile = ReconcileReport()
    /// True once the reconcile has looked at every row and file.
    public var reconcileFinished = false
    /// Times the folder was found removed and created again.
    public var folderRecreations = 0

    public init() {}
}

/// The maintainer's state that outside readers see, behind its lock.
fileprivate struct MaintainerState {
    var settings: MaintenanceSettings
    var status = MaintenanceStatus()
    var sweepRequested = false

    init(settings: MaintenanceSettings) {
        self.settings = settings
    }

    mutating func takeSweepRequest() -> Bool {
        defer { sweepRequested = false }
        return sweepRequested
    }
}

extension Duration {
    /// `7d`, `12h`, `30m` or `45s`: the largest unit that divides it, as `--max-age` is written.
    var formattedAge: String {
        let seconds = components.seconds
        for (unit, size) in [("d", Int64(86400)), ("h", 3600), ("m", 60)] where seconds >= size && seconds % size == 0 {
            return "\(seconds / size)\(unit)"
        }
        return "\(seconds)s"
    }
}

extension DiskCacheMaintainer {
    /// Evicts every unpinned entry (the `purge` command for the disk tier), pass after pass on
    /// the maintainer's queue; the cache's ``DiskCache/evictions`` counts them as
    /// ``EvictionReason/command``.
    public func purgeAll() async -> EvictionPass {
        var total = EvictionPass()
        while !Task.isCancelled {
            let pass = pass("purge") { () throws(SQLiteError) in
                try cache.evictLeastRecentlyUsed(toFree: Int.max, now: now(), reason: .command)
            }
            total.files += pass.files
            total.bytes += pass.bytes
            if pass.files == 0 { break }
        }
        state.withLock { $0.status.evictedEntries += total.files }
        logger.info("purged the disk tier: \(total.files) entries (\(ByteCount(total.bytes)))")
        return total
    }
}
