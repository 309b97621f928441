import ArgumentParser
import ImgdCore
import ImgdNetwork
import ImgdStore
import Logging

#if canImport(Glibc)
import Glibc
#endif

/// `imgd prefetch`: download every URL of some link lists into a cache folder, then exit.
struct PrefetchCommand: AsyncParsableCommand {
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

    @Option(help: "The cache folder.")
    var cache: String = "./imgd-data/cache"

    @Option(help: "The cache's size cap (units KiB, MiB, GiB, KB, MB, GB, or bytes); least recently used entries are evicted to stay under it.")
    var diskLimit: ByteCount = ByteCount(DiskCache.defaultLimit)

    @Option(help: "Entries not used for this long are removed at start (units 30m, 12h, 7d).")
    var maxAge: DurationArgument = DurationArgument(MaintenanceSettings().maxAge)

    @Option(help: "The memory tier's cap (used by the daemon to serve lookups; prefetch streams to disk and does not fill it).")
    var memoryLimit: ByteCount = ByteCount(MemoryCache.defaultLimitBytes)

    @Option(help: "Transfers at once, in all (1–1024).")
    var maxParallel: Int = DownloadPolicy().maxParallel

    @Option(help: "Transfers at once to one host:port (1–1024).")
    var maxPerHost: Int = DownloadPolicy().maxPerHost

    @Option(help: "Attempts per URL for transient failures, the first included (1–10).")
    var attempts: Int = DownloadPolicy().retry.maxAttempts

    @Option(help: "Largest body accepted, in bytes.")
    var maxBodyBytes: Int = DownloadPolicy().maxBodyBytes

    @Option(help: "Seconds allowed for one attempt.")
    var timeout: Int = Int(DownloadPolicy().totalTimeout.components.seconds)

    @Option(help: "Proxy URL: http, https, socks4a or socks5h, which resolve host names at the proxy (socks4 and socks5 are refused; proxy environment variables are ignored).")
    var proxy: String?

    @Option(
        name: .customLong("deny"),
        help: "Refuse connections to this address range (CIDR) too; repeatable. Added to the default list (link-local and metadata ranges).")
    var deniedRanges: [String] = []

    @Option(name: .customLong("deny-defaults"), help: "Whether the default denied ranges apply (true or false).")
    var denyDefaults: Bool = true

    @Option(name: .customLong("ca-file"), help: "PEM certificates trusted for https instead of the system's store (a private CA).")
    var caFile: String?

    @Flag(
        name: .customLong("sync"),
        help: "Sync the cache's filesystem before exiting, as the daemon's stop does: the entries are then trusted after a restart too (without it they are trusted until the machine restarts, and checked at first use after).")
    var sync = false

    func validate() throws {
        guard !lists.isEmpty else { throw ValidationError("give at least one link list") }
        guard (1...1024).contains(maxParallel) else { throw ValidationError("--max-parallel must be 1–1024") }
        guard (1...1024).contains(maxPerHost) else { throw ValidationError("--max-per-host must be 1–1024") }
        guard (1...10).contains(attempts) else { throw ValidationError("--attempts must be 1–10") }
        guard maxBodyBytes > 0 else { throw ValidationError("--max-body-bytes must be positive") }
        guard timeout > 0 else { throw ValidationError("--timeout must be positive") }
        guard diskLimit.bytes > 0 else { throw ValidationError("--disk-limit must be positive") }
        guard maxAge.duration > .zero else { throw ValidationError("--max-age must be positive") }
        for range in deniedRanges where IPRange(range) == nil {
            throw ValidationError("--deny \(range) is not an address range like 169.254.0.0/16")
        }
        if let proxy {
            do throws(ProxyURLError) {
                _ = try ProxyURL.check(proxy)
            } catch {
                throw ValidationError("--proxy: \(error)")
            }
        }
        if let caFile, access(caFile, R_OK) != 0 {
            throw ValidationError("--ca-file \(caFile) cannot be read: \(String(cString: strerror(errno)))")
        }
    }

    var policy: DownloadPolicy {
        var policy = DownloadPolicy()
        policy.maxParallel = maxParallel
        policy.maxPerHost = maxPerHost
        policy.retry.maxAttempts = attempts
        policy.maxBodyBytes = maxBodyBytes
        policy.totalTimeout = .seconds(timeout)
        policy.proxy = proxy
        policy.caFile = caFile
        policy.addresses = AddressPolicy(
            deniedRanges: (denyDefaults ? AddressPolicy.default.deniedRanges : []) + deniedRanges.compactMap(IPRange.init))
        return policy
    }

    func run() async throws {
        let console = Console()
        let started = ContinuousClock.now
        let disk: DiskCache
        let downloader: Downloader
        do {
            disk = try DiskCache(root: cache, limit: diskLimit.bytes)
            downloader = try Downloader(cache: disk, policy: policy)
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
        var settings = MaintenanceSettings()
        settings.maxAge = maxAge.duration
        let maintainer = DiskCacheMaintainer(
            cache: disk, settings: settings, logger: Logger(label: "imgd") { _ in ConsoleLogHandler(console: console) })
        await maintainer.sweepExpired(settings: settings)
        await maintainer.enforceLimit(settings: settings)
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
