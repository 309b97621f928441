import ImgdCore
import ImgdNetwork
import ImgdProtocol
import ImgdStore
import ImgdMemoryPressure
import Logging
import ServiceLifecycle
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Why the daemon could not start, with what it was doing.
struct DaemonStartError: Error, CustomStringConvertible {
    let description: String
}

/// The daemon's running services and what they share. Built by ``start(config:options:logger:)``
/// in dependency order; ``stop()`` takes them down in reverse.
final class DaemonServices: Sendable {
    let options: DaemonOptions
    let logger: Logger
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
    /// The HTTP face, when `http-listen` is set (or systemd passed its socket).
    let http: HTTPFaceServer?
    /// `/healthz`'s probe of the loops.
    let health: HTTPFaceHealth
    /// The daemon's own counters (`stats`), kept with the outcomes that fill them.
    var counters: DaemonCounters { outcomes.counters }
    /// Every URL's outcome, counted and published in one place.
    let outcomes: OutcomeRecorder
    /// `add`'s pins, written in batches off the engine's thread.
    let pins: PinWriter
    let startedAt = ContinuousClock.now
    /// Set while a `fsck` runs: one check at a time reads the whole cache (a second is refused
    /// at once, not queued behind it).
    let checking = Atomic<Bool>(false)
    /// Where `fsck` runs its check: a queue of its own.
    let checker = CacheChecker()
    /// URLs parsed for requests, by their text: a `get` of a URL asked before skips the parser.
    let imageURLs = ImageURLMemo()
    /// The cap the filesystem cannot honour, as found at start or the last reload; nil when it fits.
    let spaceShortfall = Locked<DiskSpaceShortfall?>(nil)
    /// The last reload's failure, shown in `status.degraded`; nil once a reload has applied.
    let reloadFailure = Locked<ReloadFailure?>(nil)
    /// The last reload asked for (SIGHUP or `reload`): the next one waits for it.
    let reloads = Locked<Task<Result<[String], ReloadFailure>, Never>?>(nil)
    /// Whether the hot set (`ready-lists`) is cached: `status.ready`, `wait-ready`, `/readyz`.
    let readiness: ReadinessTracker
    /// Warms the ready lists once the group runs (``ReadinessService``).
    let readyWarmer: ReadyListWarmer
    /// `get` latency by face and source (the control server records its face; the HTTP face
    /// records its own with ``DaemonHistograms/recordGet(face:source:nanoseconds:)``).
    let histograms: DaemonHistograms
    /// The gauges of `metrics` that cost an index query, read at most once a second.
    let gaugeCache = GaugeCache()
    /// The calendar windows: the caps in force and the lists they hold (``WindowService``).
    let windows: CalendarWindows
    /// The courtesy loop's settings and state (``CourtesyService``).
    let courtesy: Courtesy

    private init(
        options: DaemonOptions, logger: Logger, config: DaemonConfig, stateLock: CacheLock, store: ListStore, disk: DiskCache,
        memory: MemoryCache, downloader: Downloader, maintainer: DiskCacheMaintainer,
        pressure: MemoryPressureService, spool: SpoolService, events: EventHub, server: ControlServer,
        http: HTTPFaceServer?, outcomes: OutcomeRecorder, histograms: DaemonHistograms, windows: CalendarWindows
    ) {
        self.windows = windows
        courtesy = Courtesy(
            enabled: config.courtesy, threshold: config.courtesyThreshold, files: config.courtesyPressure, downloader: downloader,
            logger: logger, currentCap: { windows.snapshot.policy.maxParallel })
        self.outcomes = outcomes
        self.histograms = histograms
        pins = PinWriter(index: disk.index, outcomes: outcomes, logger: logger)
        self.options = options
        self.logger = logger
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
        self.http = http
        health = HTTPFaceHealth { [downloader, spool] in
            if !(await HTTPFaceHealth.answers(within: HTTPFaceHealth.probeTimeout) { await downloader.ping() }) {
                return "the download engine's loop"
            }
            if !(await HTTPFaceHealth.answers(within: HTTPFaceHealth.probeTimeout) { await spool.respond() }) {
                return "the spool's queue"
            }
            return nil
        }
        readiness = ReadinessTracker(lists: config.readyLists, fraction: config.readyFraction)
        readyWarmer = ReadyListWarmer(
            paths: config.readyLists, tracker: readiness, downloader: downloader, limits: config.spoolLimits,
            maxQueued: config.maxQueued, logger: logger, onOutcome: { outcomes.record($0, $1) })
    }

    static func start(config: DaemonConfig, options: DaemonOptions, logger: Logger) async throws(DaemonStartError)
        -> DaemonServices
    {
        // Read once: sd_listen_fds() unsets LISTEN_FDS, so a second look would find nothing.
        let inherited = SocketActivation.inherited()
        let address = listenAddress(config: config, inherited: inherited)
        let httpAddress = try httpListenAddress(config: config, inherited: inherited)
        let socket = switch address {
        case .path(let path): path
        case .inheritedDescriptor(let descriptor): "fd \(descriptor) passed by systemd (socket activation)"
        }
        // Before anything is opened: a max-connections the descriptor limit cannot serve is
        // refused now, not met as EMFILE on accept() (or a download, or a database) later.
        try DescriptorBudget(config: config).check(limit: DescriptorBudget.raiseLimit())
        logger.info("imgd \(ImgdVersion.string) (pid \(getpid())): spool \(config.spool), cache \(config.cache), state \(config.state), socket \(socket)\(httpAddress.map { ", http \($0)" } ?? "")")
        if !inherited.unknown.isEmpty {
            logger.warning("systemd passed sockets imgd does not use (left open, unused): \(inherited.unknown.joined(separator: ", "))")
        }
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
            logger.notice("moved \(disk.directory.movedFromTwoLevelLayout) cache files from the two-level folder layout of earlier versions to the one-level layout")
        }
        if disk.index.previousStopUnsyncedBeforeRestart {
            logger.notice("the last stop (imgd prefetch) did not sync, and the machine has restarted since: entries are checked before first use")
        } else if !disk.index.previousShutdownWasClean {
            logger.warning("the last run did not stop cleanly: entries are checked before first use")
        }
        let memory = MemoryCache(limitBytes: config.memoryLimit)
        let downloader: Downloader
        do {
            let tierLog = TierFallbackLog(logger: logger)
            downloader = try Downloader(
                cache: disk, policy: config.downloadPolicy, keyPolicy: config.keyPolicy, refresh: config.refreshPolicy,
                onTierFallback: { tier, cause in tierLog.note(tier: tier, cause: cause) })
        } catch {
            throw DaemonStartError(description: "\(error)")
        }
        do {
            if let message = Downloader.foreignKeysMessage(try downloader.removeEntriesUnderForeignKeys()) { logger.notice("\(message)") }
        } catch {
            logger.warning("the check of the cache's keys written by an earlier version failed (\(error)); it is made again at the next start")
        }
        let events = EventHub()
        // Before anything can evict (the maintainer's first sweep, the first reservation): every
        // eviction, whoever makes it, is counted by the disk tier and published from here.
        disk.evictions.observe { eviction in
            events.publish("evicted", data: [
                "count": JSONValue(eviction.files), "bytes": JSONValue(eviction.bytes), "reason": .string(eviction.reason.rawValue),
            ])
        }
        let outcomes = OutcomeRecorder(events: events, counters: DaemonCounters())
        downloader.observeRevalidations { url, result in
            // The memory tier's copy carries the entry's old freshness, or (a new body) old bytes.
            if case .success(let image) = result { memory.remove(image.key) }
            outcomes.revalidated(url, result)
        }
        let maintainer = DiskCacheMaintainer(cache: disk, settings: config.maintenance, logger: logger)
        // Quotas per user: owners over their limit are evicted down on the housekeeping queue.
        disk.setQuotas(config.userQuotas)
        let source = MemoryPressureSource.resolve(environment: options.environment)
        let pressure = MemoryPressureService(
            source: source, memory: memory, pollingThreshold: config.pressureThreshold, logger: logger
        ) { event, purged in
            events.publish("memory_pressure", data: ["origin": .string(event.origin), "purged_bytes": JSONValue(purged), "count": JSONValue(event.count)])
        }
        let spool: SpoolService
        do {
            spool = try SpoolService(
                path: config.spool, store: store, limits: config.spoolLimits, warming: config.warmingLimits, downloader: downloader,
                disk: disk, logger: logger,
                onEvent: { outcomes.publish($0) })
        } catch {
            throw DaemonStartError(description: "\(error)")
        }
        // The caps of the window in force go to the downloader now, and the lists it holds to
        // the spool before it resumes any.
        let windows = CalendarWindows(schedule: config.windows, base: config.downloadPolicy, downloader: downloader) {
            schedule, position, policy, changed in
            spool.onExecutor { $0.update(windowGate: ListWindowGate(schedule: schedule, open: position.current?.window.name)) }
            guard changed else { return }
            events.publish("window", data: CalendarWindows.json(position, policy: policy))
            if let current = position.current {
                logger.info("calendar window \(current.window.name) is open: max-parallel \(policy.maxParallel), max-rate \(policy.maxRate.map { "\(ByteCount($0))/s" } ?? "none")")
            } else if !schedule.isEmpty {
                logger.info("no calendar window is open: max-parallel \(policy.maxParallel), max-rate \(policy.maxRate.map { "\(ByteCount($0))/s" } ?? "none")")
            }
        }
        windows.apply(at: CalendarWindows.now())
        let handler = DaemonCommandHandler()
        let histograms = DaemonHistograms()
        let server = ControlServer(
            listening: address,
            limits: config.controlLimits, handler: handler, events: events, logger: logger, histograms: histograms)
        let backend = HTTPFaceBackend()
        let http = httpAddress.map {
            HTTPFaceServer(listening: $0, limits: config.httpLimits, allowRemote: config.httpAllowRemote, backend: backend, logger: logger)
        }
        let services = DaemonServices(
            options: options, logger: logger, config: config, stateLock: stateLock, store: store, disk: disk, memory: memory,
            downloader: downloader, maintainer: maintainer, pressure: pressure, spool: spool, events: events,
            server: server, http: http, outcomes: outcomes, histograms: histograms, windows: windows)
        handler.attach(services)
        backend.attach(services)
        services.checkDiskSpace()

        do {
            try await spool.start()
        } catch {
            await services.abandonStart()
            throw DaemonStartError(description: "\(error)")
        }
        // The HTTP face before the control socket: a client that sees the control socket answer
        // finds the face listening too.
        do throws(HTTPFaceError.Start) {
            try await http?.start()
        } catch {
            await services.abandonStart()
            throw DaemonStartError(description: "\(error)")
        }
        do {
            try await server.start()
        } catch {
            await services.abandonStart()
            throw DaemonStartError(description: "\(error)")
        }
        services.notifier.ready(status: services.statusLine())
        logger.info("ready")
        return services
    }

    /// The socket: the one systemd passed (socket activation), else the configured path.
    private static func listenAddress(config: DaemonConfig, inherited: SocketActivation.Inherited) -> ControlListenAddress {
        if let fd = inherited.control { return .inheritedDescriptor(fd) }
        return .path(config.socket)
    }

    /// The HTTP face's socket: the one systemd passed as `http`, else `http-listen`; nil for no
    /// face. A passed socket without `http-listen` is an error: the unit and the settings
    /// disagree, and which is meant cannot be guessed.
    private static func httpListenAddress(config: DaemonConfig, inherited: SocketActivation.Inherited) throws(DaemonStartError)
        -> HTTPListenAddress?
    {
        guard let fd = inherited.http else { return config.httpListen }
        guard config.httpListen != nil else {
            throw DaemonStartError(
                description: "systemd passed an HTTP socket (imgd-http.socket) but http-listen is not set: set it to the socket's address "
                    + "(as in imgd-http.socket's ListenStream=), or stop imgd-http.socket")
        }
        return .inheritedDescriptor(fd)
    }

    /// The services that run the started daemon, in start order; the group stops them in
    /// reverse, SIGTERM and SIGINT (through `signals`) starting a graceful shutdown that is
    /// cancelled past ``Daemon/stopDeadline``. The teardown is ordered by that reverse order:
    /// ``WarmingService`` stops taking work and cancels transfers, the control socket drains,
    /// the progress reports, the pressure watch and the cache's upkeep end, and
    /// ``StateService`` writes the last progress and closes the index.
    /// Without `signals` (tests), only ``ServiceGroup/triggerGracefulShutdown()`` stops it.
    func serviceGroup(signals: SignalService?) -> ServiceGroup {
        var services: [ServiceGroupConfiguration.ServiceConfiguration] = [
            .init(service: StateService(spool: spool, pins: pins, disk: disk, stateLock: stateLock, logger: logger)),
            .init(service: maintainer),
            .init(service: PressureWatchService(pressure: pressure, logger: logger)),
            .init(service: ProgressReporter(
                notifier: notifier,
                probe: { [downloader, spool] in
                    await downloader.ping()  // a round trip through the engine's loop
                    await spool.respond()  // and through the spool's queue
                },
                status: { self.statusLine() })),
            .init(service: server),
        ]
        services.append(.init(service: WindowService(windows: windows)))
        services.append(.init(service: CourtesyService(courtesy: courtesy)))
        // After the control socket, so it stops first; its intake stops with the control socket's.
        if let http { services.append(.init(service: http)) }
        services.append(.init(service: WarmingService(
            notifier: notifier, spool: spool, server: server, http: http, downloader: downloader, logger: logger)))
        // Last but the signals: it stops first, withdrawing its URLs before the downloader stops.
        services.append(.init(service: ReadinessService(warmer: readyWarmer, tracker: readiness)))
        if let signals { services.append(.init(service: signals, successTerminationBehavior: .gracefullyShutdownGroup)) }
        var configuration = ServiceGroupConfiguration(services: services, logger: logger)
        configuration.maximumGracefulShutdownDuration = Daemon.stopDeadline
        return ServiceGroup(configuration: configuration)
    }

    /// Undoes a start that failed once the index was open: stops what was started and closes the
    /// index cleanly, as a stop would.
    private func abandonStart() async {
        await spool.stop()
        await server.stop()
        await http?.stop()
        _ = await downloader.shutdown(within: Daemon.stopDeadline)
        await StateService(spool: spool, pins: pins, disk: disk, stateLock: stateLock, logger: logger).close()
    }

    private static func makeFolder(_ path: String) throws(SpoolError) {
        if let failure = Folders.make(path, mode: 0o750) { throw .cannotCreate(path: failure.path, errno: failure.errno) }
    }
}
