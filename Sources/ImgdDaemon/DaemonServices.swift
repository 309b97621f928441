import ImgdCore
import ImgdNetwork
import ImgdProtocol
import ImgdStore
import ImgdMemoryPressure
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Why the daemon could not start, with what it was doing.
struct DaemonStartError: Error, CustomStringConvertible {
    let description: String
}

/// The daemon's running services and what they share. Built by ``start(config:options:log:)``
/// in dependency order; ``stop()`` takes them down in reverse.
final class DaemonServices: Sendable {
    let options: DaemonOptions
    let log: DaemonLog
    let notifier = SystemdNotifier()
    let config: Locked<DaemonConfig>
    /// Held while running: one imgd at a time owns a state folder (its lists) and so its spool.
    let stateLock: CacheLock
    let store: ListStore
    let disk: DiskCache
    let memory: MemoryCache
    let tiers: TieredCache
    let downloader: Downloader
    let maintainer: DiskCacheMaintainer
    let pressure: MemoryPressureService
    let spool: SpoolService
    let events: EventHub
    let server: ControlServer
    let counters: DaemonCounters
    let startedAt = ContinuousClock.now
    /// Set while a `fsck` runs: one check at a time reads the whole cache.
    let checking = Atomic<Bool>(false)
    /// The cap the filesystem cannot honour, as found at start or the last reload; nil when it fits.
    let spaceShortfall = Locked<DiskSpaceShortfall?>(nil)
    private let tasks = Locked<[Task<Void, Never>]>([])

    private init(
        options: DaemonOptions, log: DaemonLog, config: DaemonConfig, stateLock: CacheLock, store: ListStore, disk: DiskCache,
        memory: MemoryCache, downloader: Downloader, maintainer: DiskCacheMaintainer,
        pressure: MemoryPressureService, spool: SpoolService, events: EventHub, server: ControlServer,
        counters: DaemonCounters
    ) {
        self.counters = counters
        self.options = options
        self.log = log
        self.config = Locked(config)
        self.stateLock = stateLock
        self.store = store
        self.disk = disk
        self.memory = memory
        tiers = TieredCache(memory: memory, disk: disk)
        self.downloader = downloader
        self.maintainer = maintainer
        self.pressure = pressure
        self.spool = spool
        self.events = events
        self.server = server
    }

    static func start(config: DaemonConfig, options: DaemonOptions, log: DaemonLog) async throws(DaemonStartError)
        -> DaemonServices
    {
        // Read once: sd_listen_fds() unsets LISTEN_FDS, so a second look would find nothing.
        let address = listenAddress(config: config)
        let socket = switch address {
        case .path(let path): path
        case .inheritedDescriptor(let descriptor): "fd \(descriptor) passed by systemd (socket activation)"
        }
        // Before anything is opened: a max-connections the descriptor limit cannot serve is
        // refused now, not met as EMFILE on accept() (or a download, or a database) later.
        try DescriptorBudget(config: config).check(limit: DescriptorBudget.raiseLimit())
        log("imgd \(ImgdVersion.string) (pid \(getpid())): spool \(config.spool), cache \(config.cache), state \(config.state), socket \(socket)")
        // Before the lists are read: a second imgd on this state folder would resume the first
        // one's lists and claim from its spool.
        let stateLock: CacheLock
        do {
            try makeFolder(config.state)
        } catch {
            throw DaemonStartError(description: "state database in \(config.state): \(error)")
        }
        do {
            stateLock = try CacheLock(path: config.state + "/lock")
        } catch .held(_, let pid) {
            throw DaemonStartError(
                description: "another imgd\(pid.map { " (pid \($0))" } ?? "") is using the state folder \(config.state) "
                    + "(its lists and spool); stop it, or give this one another --state and --spool")
        } catch {
            throw DaemonStartError(description: "\(error)")
        }
        let store: ListStore
        do {
            store = try ListStore(path: config.state + "/imgd-state.sqlite")
        } catch {
            throw DaemonStartError(description: "state database in \(config.state): \(error)")
        }
        let disk: DiskCache
        do {
            disk = try DiskCache(root: config.cache, limit: config.diskLimit)
        } catch {
            throw DaemonStartError(description: "\(error)")
        }
        if disk.directory.movedFromTwoLevelLayout > 0 {
            log("moved \(disk.directory.movedFromTwoLevelLayout) cache files from the two-level folder layout of earlier versions to the one-level layout", level: .notice)
        }
        if !disk.index.previousShutdownWasClean {
            log("the last run did not stop cleanly: entries are checked before first use", level: .warning)
        }
        let memory = MemoryCache(limitBytes: config.memoryLimit)
        let downloader: Downloader
        do {
            downloader = try Downloader(cache: disk, policy: config.downloadPolicy)
        } catch {
            throw DaemonStartError(description: "\(error)")
        }
        let events = EventHub()
        // Before anything can evict (the maintainer's first sweep, the first reservation): every
        // eviction, whoever makes it, is counted by the disk tier and published from here.
        disk.evictions.observe { eviction in
            events.publish("evicted", data: [
                "count": JSONValue(eviction.files), "bytes": JSONValue(eviction.bytes), "reason": .string(eviction.reason.rawValue),
            ])
        }
        let counters = DaemonCounters()
        let maintainer = DiskCacheMaintainer(cache: disk, settings: config.maintenance, log: { log($0) })
        let source = MemoryPressureSource.resolve(environment: options.environment)
        let pressure = MemoryPressureService(
            source: source, memory: memory, pollingThreshold: config.pressureThreshold, log: { log($0, level: .notice) }
        ) { event, purged in
            events.publish("memory_pressure", data: ["origin": .string(event.origin), "purged_bytes": JSONValue(purged), "count": JSONValue(event.count)])
        }
        let spool: SpoolService
        do {
            spool = try SpoolService(
                path: config.spool, store: store, limits: config.spoolLimits, downloader: downloader, disk: disk, log: log,
                onEvent: { DaemonServices.publish($0, to: events, counting: counters) })
        } catch {
            throw DaemonStartError(description: "\(error)")
        }
        let handler = DaemonCommandHandler()
        let server = ControlServer(
            listening: address,
            limits: config.controlLimits, handler: handler, events: events,
            log: { log($0) })
        let services = DaemonServices(
            options: options, log: log, config: config, stateLock: stateLock, store: store, disk: disk, memory: memory,
            downloader: downloader, maintainer: maintainer, pressure: pressure, spool: spool, events: events,
            server: server, counters: counters)
        handler.attach(services)
        services.checkDiskSpace()

        services.spawn { await maintainer.run() }
        services.spawn {
            do {
                try await pressure.run()
            } catch {
                log("memory pressure watch ended: \(error); the purge command still works", level: .warning)
            }
        }
        do {
            try spool.start()
        } catch {
            await services.stop()
            throw DaemonStartError(description: "\(error)")
        }
        do {
            try await server.start()
        } catch {
            await services.stop()
            throw DaemonStartError(description: "\(error)")
        }
        services.spawn { await services.reportProgress() }
        services.notifier.ready(status: services.statusLine())
        log("ready")
        return services
    }

    /// The socket: the one systemd passed (socket activation), else the configured path.
    private static func listenAddress(config: DaemonConfig) -> ControlListenAddress {
        if let fd = SocketActivation.listeningDescriptor() { return .inheritedDescriptor(fd) }
        return .path(config.socket)
    }

    /// Runs `body` as a child of the daemon, cancelled by ``stop()``.
    private func spawn(_ body: @escaping @Sendable () async -> Void) {
        let task = Task { await body() }
        tasks.withLock { $0.append(task) }
    }

    // MARK: - Reload and stop

    /// SIGHUP: reads the configuration again and applies the settings declared reloadable
    /// (``ConfigReload``); the others keep their running value until a restart.
    func reload() async {
        notifier.reloading()
        defer { notifier.ready(status: statusLine()) }
        let new: DaemonConfig
        do {
            new = try options.load()
        } catch {
            log("reload failed, keeping the running configuration: \(error)", level: .error)
            return
        }
        // With the new cap, and also when nothing changed: a reload after freeing space checks again.
        defer { checkDiskSpace() }
        let reload = ConfigReload(running: config.withLock { $0 }, loaded: new)
        for message in reload.messages { log(message.text, level: message.level) }
        let applied = reload.applied
        config.withLock { $0 = applied }
        maintainer.update(applied.maintenance, diskLimit: applied.diskLimit)
        memory.setLimits(bytes: applied.memoryLimit, entries: memory.statistics.limitEntries)
        downloader.update(policy: applied.downloadPolicy)
        // A raised max-parallel may need more descriptors than the start checked for.
        let budget = DescriptorBudget(config: applied), limit = DescriptorBudget.raiseLimit()
        if budget.needed > limit {
            log("max-parallel \(applied.maxParallel) with max-connections \(applied.maxConnections) needs \(budget.needed) file "
                + "descriptors, but the limit is \(limit) (RLIMIT_NOFILE): connections or downloads may fail with "
                + "\"too many open files\"; lower max-parallel or raise the limit", level: .warning)
        }
        spool.update(limits: applied.spoolLimits)
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
            log("degraded: \(found)", level: .warning)
        } else if old != nil {
            log("recovered: \(DiskSpaceShortfall.code) cleared")
        }
    }

    /// What `status.degraded` lists: the disk tier's faults, and a cap its filesystem cannot honour.
    var degradations: [(code: String, message: String)] {
        var all = maintainer.status.faults.map { (code: $0.code, message: "\($0)") }
        if let shortfall = spaceShortfall.withLock({ $0 }) { all.append((shortfall.code, "\(shortfall)")) }
        return all
    }

    /// Stops every service, in reverse order, within ``Daemon/stopDeadline``.
    func stop() async {
        notifier.stopping()
        spool.stop()
        // The server stops accepting and tells its connections now; its grace period is for
        // running requests to finish, and a request waiting on a download finishes only once
        // transfers are cancelled: cancel them meanwhile, not after the grace period.
        let server = server
        let serverStopped = Task { await server.stop() }
        let downloader = downloader
        // Whichever comes first: the engine released libcurl, or the deadline (a task group would
        // wait for the shutdown anyway, since it does not end on cancellation).
        let (outcome, report) = AsyncStream<Bool>.makeStream()
        Task {
            await downloader.shutdown()
            report.yield(true)
        }
        Task {
            try? await Task.sleep(for: Daemon.stopDeadline)
            report.yield(false)
        }
        var first = outcome.makeAsyncIterator()
        let finished = await first.next() ?? false
        if !finished { log("transfers did not stop within \(Daemon.stopDeadline); exiting anyway", level: .warning) }
        await serverStopped.value
        spool.finalFlush()
        let running = tasks.withLock { tasks in
            defer { tasks.removeAll() }
            return tasks
        }
        for task in running { task.cancel() }
        for task in running { await task.value }
        do {
            try disk.close()
        } catch {
            log("closing the cache index failed (the next start checks entries): \(error)", level: .warning)
        }
        stateLock.release()
        log("stopped")
    }

    // MARK: - Progress

    /// `STATUS=` every 2 seconds; `WATCHDOG=1` at half the watchdog interval, only while the
    /// transfer engine's loop and the spool's queue both answer (the loops that could hang).
    private func reportProgress() async {
        let ping = notifier.watchdogInterval.map { $0 / 2 } ?? .seconds(2)
        let interval = min(ping, .seconds(2))
        while !Task.isCancelled {
            try? await Task.sleep(for: interval)
            guard !Task.isCancelled else { return }
            _ = await downloader.rememberedFailures()  // a round trip through the engine's loop
            await spool.respond()  // and through the spool's queue
            notifier.status(statusLine())
            notifier.watchdog()
        }
    }

    /// "warming 1234/5000 in 2 lists; cache 812 MiB of 1 GiB".
    func statusLine() -> String {
        let progress = spool.progress
        let budget = disk.budget.snapshot
        let cache = "cache \(ByteCount(budget.stored)) of \(ByteCount(budget.limit))"
        let faults = degradations
        let degraded = faults.isEmpty ? "" : "; degraded: " + faults.map(\.code).joined(separator: ", ")
        guard progress.lists > 0 else { return "idle; \(cache)\(degraded)" }
        return "warming \(progress.settled)/\(progress.total) in \(progress.lists) list\(progress.lists == 1 ? "" : "s"); \(cache)\(degraded)"
    }

    private static func publish(_ event: SpoolEvent, to events: EventHub, counting counters: DaemonCounters) {
        switch event {
        case .listClaimed(let name, let total):
            events.publish("list_claimed", data: ["name": .string(name), "total": JSONValue(total)])
        case .listDone(let record):
            events.publish("list_done", data: [
                "name": .string(record.name), "state": .string(record.state.rawValue), "cached": JSONValue(record.cached),
                "already_cached": JSONValue(record.alreadyCached), "failed": JSONValue(record.failed),
            ])
        case .fetched(let url, let bytes, let format):
            events.publish("fetched", data: ["url": .string(url), "bytes": JSONValue(bytes), "format": .string(format)])
        case .failed(let url, let code, let message):
            counters.update { $0.failuresByCode[code, default: 0] += 1 }
            events.publish("failed", data: ["url": .string(url), "code": .string(code), "message": .string(message)])
        case .refused:
            break
        }
    }

    private static func makeFolder(_ path: String) throws(SpoolError) {
        if let failure = Folders.make(path, mode: 0o750) { throw .cannotCreate(path: failure.path, errno: failure.errno) }
    }
}

/// Counters the daemon keeps beyond its services' own, for `stats`.
final class DaemonCounters: Sendable {
    struct Values: Sendable {
        var gets = 0
        var diskHits = 0
        var misses = 0
        /// Failed URLs (of lists, `add` and `get`) by error code.
        var failuresByCode: [String: Int] = [:]
    }

    private let state = Locked(Values())

    var values: Values { state.withLock { $0 } }

    func update(_ change: (inout Values) -> Void) {
        state.withLock { change(&$0) }
    }
}
