import ImgdCore
import ImgdNetwork
import ImgdStore
import ImgdMemoryPressure

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

/// The daemon: services started in order and stopped in reverse.
///
/// Start: state database → disk tier (takes the cache lock) → memory tier → downloader → cache
/// upkeep → memory-pressure watch → spool (resumes claimed lists, then watches) → control
/// socket → `READY=1`. Stop (SIGTERM/SIGINT): `STOPPING=1`, the spool stops taking lists, the
/// socket stops accepting, transfers are cancelled (their URLs stay pending for the next run),
/// progress and access times are written, the index is closed cleanly; exit status 0. SIGHUP
/// reloads the configuration file, applying limits and caps, and logs what changed.
public enum Daemon {
    /// The longest a stop may take before the daemon exits anyway.
    static let stopDeadline: Duration = .seconds(5)

    /// Runs until SIGTERM or SIGINT; returns the exit status.
    public static func run(_ options: DaemonOptions) async -> Int32 {
        let log = DaemonLog(environment: options.environment)
        let config: DaemonConfig
        do {
            config = try options.load()
        } catch {
            log("\(error)", level: .error)
            return 2
        }
        let signals = SignalStream()
        let services: DaemonServices
        do {
            services = try await DaemonServices.start(config: config, options: options, log: log)
        } catch {
            log("cannot start: \(error)", level: .error)
            return 1
        }
        for await number in signals.signals {
            if number == SIGHUP {
                await services.reload()
                continue
            }
            log("received \(number == SIGTERM ? "SIGTERM" : "SIGINT"), stopping")
            break
        }
        signals.stop()
        await services.stop()
        return 0
    }
}
