import ImgdCore
import ImgdNetwork
import ImgdStore
import ImgdMemoryPressure
import Logging

#if canImport(Glibc)
import Glibc
#endif

/// How the daemon was asked to run: the settings, and where they came from (for reloads).
public struct DaemonOptions: Sendable {
    /// The configuration file given (or the packaged default), read again on SIGHUP.
    public var configFile: String?
    /// Settings given as flags (name, text), applied over the file at start and at each reload.
    public var flags: [(key: String, value: String)]
    public var environment: [String: String]

    public init(configFile: String?, flags: [(key: String, value: String)], environment: [String: String]) {
        self.configFile = configFile
        self.flags = flags
        self.environment = environment
    }

    /// The settings these options give now.
    public func load() throws(ConfigError) -> DaemonConfig {
        try DaemonConfig.load(environment: environment, file: configFile, flags: flags)
    }
}

/// The daemon: its parts started in order, then run as a `ServiceGroup` that stops them in
/// reverse.
///
/// Start: signals trapped → state database → disk tier (takes the cache lock) → memory tier →
/// downloader → spool (resumes claimed lists, then watches) → control socket → `READY=1`; then
/// the group runs the services (``DaemonServices/serviceGroup(signals:)``). Stop (SIGTERM or
/// SIGINT, a graceful shutdown of the group, cancelled past ``stopDeadline``): `STOPPING=1`,
/// the spool stops taking lists, the socket stops accepting, transfers are cancelled (their URLs
/// stay pending for the next run), the socket drains, progress and access times are written,
/// the index is closed cleanly; exit status 0. SIGHUP reloads the configuration file, applying
/// limits and caps, and logs what changed.
public enum Daemon {
    /// The longest a stop may take before the daemon exits anyway.
    static let stopDeadline: Duration = .seconds(5)

    /// Runs until SIGTERM or SIGINT; returns the exit status.
    public static func run(_ options: DaemonOptions) async -> Int32 {
        var logger = JournalLogHandler.logger(environment: options.environment)
        let config: DaemonConfig
        do {
            config = try options.load()
        } catch {
            logger.error("\(error)")
            return 2
        }
        logger.logLevel = config.logLevel
        // Before anything starts: a signal during start-up is kept for when the group runs.
        let signals = await SignalService.trap()
        let services: DaemonServices
        do {
            services = try await DaemonServices.start(config: config, options: options, logger: logger)
        } catch {
            logger.error("cannot start: \(error)")
            return 1
        }
        let signalService = SignalService(signals: signals, logger: logger) {
            // A failure is logged and shown in status.degraded by the reload itself.
            _ = try? await services.reload()
        }
        do {
            try await services.serviceGroup(signals: signalService).run()
        } catch {
            logger.error("stopping: \(error)")
            return 1
        }
        return 0
    }
}
