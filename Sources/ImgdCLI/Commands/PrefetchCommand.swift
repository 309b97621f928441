import ArgumentParser
import ImgdCore
import ImgdDaemon
import ImgdNetwork
import ImgdStore
import Logging

/// `imgd prefetch`: download every URL of some link lists into a cache folder, then exit.
struct PrefetchCommand: AsyncParsableCommand, SettingOptions {
    static let configuration = CommandConfiguration(
        commandName: "prefetch",
        abstract: "Download every image of some link lists into the cache folder, then exit.",
        discussion: """
            A link list is UTF-8 text with one http(s) URL a line; blank lines and lines starting \
            with # are ignored. A bad line is reported with its line number and the rest proceed.

            Prints a summary on stdout, each failure (URL, error code, reason) on stderr, and a \
            live progress line when stderr is a terminal. Exit status: 0 when every URL is cached, \
            1 when some failed, 2 on bad usage.
            """)

    @Argument(help: "Link list files.")
    var lists: [String]

    // The daemon's settings, as `imgd run` takes them (``SettingOptions``): the same parser,
    // ranges, minima, help and defaults. The cache folder's default is the one outside systemd:
    // prefetch does not read systemd's folders. There is no --memory-limit: prefetch writes to
    // the disk tier only and makes no memory tier.
    @Option(help: .setting("cache", underSystemd: false)) var cache: String?
    @Option(help: .setting("disk-limit")) var diskLimit: String?
    @Option(help: .setting("max-age")) var maxAge: String?
    @Option(help: .setting("max-parallel")) var maxParallel: String?
    @Option(help: .setting("max-per-host")) var maxPerHost: String?
    @Option(help: .setting("attempts")) var attempts: String?
    @Option(help: .setting("max-body-bytes")) var maxBodyBytes: String?
    @Option(help: .setting("timeout")) var timeout: String?
    @Option(help: .setting("proxy")) var proxy: String?
    @Option(help: .setting("ca-file")) var caFile: String?
    @Option(help: .setting("deny")) var deny: [String] = []
    @Option(help: .setting("deny-defaults")) var denyDefaults: String?

    @Flag(
        name: .customLong("sync"),
        help: "Sync the cache's filesystem before exiting, as the daemon's stop does: the entries are then trusted after a restart too (without it they are trusted until the machine restarts, and checked at first use after).")
    var sync = false

    static let otherOptions: Set<String> = ["_lists", "_sync"]

    /// The settings the flags give over the embedded defaults outside systemd, read as `imgd
    /// run` reads its flags (``DaemonConfig/apply(flags:)``).
    func settings() throws(ConfigError) -> DaemonConfig {
        var config = DaemonConfig.embedded(environment: [:])
        try config.apply(flags: settingFlags)
        return config
    }

    func validate() throws {
        guard !lists.isEmpty else { throw ValidationError("give at least one link list") }
        do {
            _ = try settings()
        } catch {
            throw ValidationError("\(error)")
        }
    }

    func run() async throws {
        let console = Console()
        let started = ContinuousClock.now
        let config: DaemonConfig
        do {
            config = try settings()  // checked by validate(); a ca-file may have gone since
        } catch {
            console.message("imgd: \(error)")
            throw ExitCode(2)
        }
        let disk: DiskCache
        let downloader: Downloader
        do {
            disk = try DiskCache(root: config.cache, limit: config.diskLimit)
            // The daemon's projection of its settings; those prefetch does not take (the rate
            // cap, the tier, host tables) keep their defaults.
            downloader = try Downloader(cache: disk, policy: config.downloadPolicy)
        } catch {
            console.message("imgd: \(error)")
            throw ExitCode(1)
        }
        // As the daemon does at its first start on a cache an earlier version wrote.
        do {
            if let message = Downloader.foreignKeysMessage(try downloader.removeEntriesUnderForeignKeys()) { console.message("imgd: \(message)") }
        } catch {
            console.message("imgd: the check of the cache's keys written by an earlier version failed, ignoring (it is made again next time): \(error)")
        }
        // Housekeeping before the first download: entries past --max-age go, and a cache over a
        // lowered --disk-limit is brought down to its low-water mark.
        let upkeep = config.maintenance
        let maintainer = DiskCacheMaintainer(
            cache: disk, settings: upkeep, logger: Logger(label: "imgd") { _ in ConsoleLogHandler(console: console) })
        await maintainer.sweepExpired(settings: upkeep)
        await maintainer.enforceLimit(settings: upkeep)
        let counts = await PrefetchRun(lists: lists, downloader: downloader, console: console).run()
        await downloader.shutdown()
        do {
            // Its user waits for the exit: no sync unless asked; the stop is then clean until the
            // machine restarts (DiskCache.close(syncing:)).
            try disk.close(syncing: sync)
        } catch {
            console.message("imgd: closing the cache index failed, ignoring (run imgd fsck if the disk reported errors): \(error)")
        }
        console.output(PrefetchRun.summary(counts, lists: lists.count, duration: .now - started))
        if counts.failed > 0 { throw ExitCode(1) }
    }
}
