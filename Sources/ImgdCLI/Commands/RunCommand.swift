import ArgumentParser
import ImgdDaemon

#if canImport(Glibc)
import Glibc
#endif

/// `imgd` (or `imgd run`): the daemon. Watches the spool, warms the cache, answers on the
/// control socket, until SIGTERM.
///
/// Every option but `--config` is a setting of ``DaemonConfig/settings``, declared there once
/// with its help and default; an option here only gives it to swift-argument-parser, which
/// cannot declare options at run time (``SettingOptions``: `settingFlags` gathers them by
/// reflection). A test checks the options and the table match one to one.
struct RunCommand: AsyncParsableCommand, SettingOptions {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Run the daemon (the default when no command is given).",
        discussion: """
            With no flags, everything lives under ./imgd-data (spool/, cache/, state/, imgd.sock); \
            under systemd, the state in $STATE_DIRECTORY and the spool in $STATE_DIRECTORY/spool (the \
            packaged unit passes --spool /var/spool/imgd), the cache in $CACHE_DIRECTORY and \
            imgd.sock in $RUNTIME_DIRECTORY. Each \
            flag is also a top-level key of the --config file (TOML 1.0: disk-limit = "2GiB"); \
            flags win. The file may also hold tables, which reload with it: [host."PATTERN"] (per-host \
            caps, headers, rates, mirrors), [window."NAME"] (calendar windows: caps by weekday and \
            hour, lists held to their hours) and [quota."NAME"] (quotas per user). \
            SIGHUP reloads the file and applies \(listed(DaemonConfig.reloadableSettingNames, "and")); \
            a changed \(listed(DaemonConfig.restartSettingNames, "or")) needs a restart. \
            `imgctl reload` does the same and exits 1 when the file does not load. \
            SIGTERM or SIGINT stops within 5 seconds. See Protocol.md.
            """)

    /// "a, b and c".
    private static func listed(_ names: [String], _ conjunction: String) -> String {
        guard let last = names.last else { return "" }
        return names.count == 1 ? last : names.dropLast().joined(separator: ", ") + " \(conjunction) " + last
    }

    @Option(help: "Configuration file (TOML 1.0; every flag below is a top-level key).")
    var config: String?

    @Option(help: .setting("spool")) var spool: String?
    @Option(help: .setting("cache")) var cache: String?
    @Option(help: .setting("state")) var state: String?
    @Option(help: .setting("socket")) var socket: String?
    @Option(help: .setting("disk-limit")) var diskLimit: String?
    @Option(help: .setting("max-age")) var maxAge: String?
    @Option(help: .setting("sweep-interval")) var sweepInterval: String?
    @Option(help: .setting("refresh")) var refresh: String?
    @Option(help: .setting("min-fresh")) var minFresh: String?
    @Option(help: .setting("memory-limit")) var memoryLimit: String?
    @Option(help: .setting("max-parallel")) var maxParallel: String?
    @Option(help: .setting("max-per-host")) var maxPerHost: String?
    @Option(help: .setting("attempts")) var attempts: String?
    @Option(help: .setting("max-body-bytes")) var maxBodyBytes: String?
    @Option(help: .setting("timeout")) var timeout: String?
    @Option(help: .setting("max-rate")) var maxRate: String?
    @Option(help: .setting("max-rate-applies-to")) var maxRateAppliesTo: String?
    @Option(help: .setting("proxy")) var proxy: String?
    @Option(help: .setting("tier")) var tier: String?
    @Option(help: .setting("tier-fallback")) var tierFallback: String?
    @Option(help: .setting("ca-file")) var caFile: String?
    @Option(help: .setting("headers-file")) var headersFile: String?
    @Option(help: .setting("deny")) var deny: [String] = []
    @Option(help: .setting("deny-defaults")) var denyDefaults: String?
    @Option(help: .setting("max-connections")) var maxConnections: String?
    @Option(help: .setting("max-connections-per-peer")) var maxConnectionsPerPeer: String?
    @Option(help: .setting("admin-group")) var adminGroup: String?
    @Option(help: .setting("pressure-threshold")) var pressureThreshold: String?
    @Option(help: .setting("log-level")) var logLevel: String?
    @Option(help: .setting("max-list-bytes")) var maxListBytes: String?
    @Option(help: .setting("max-list-lines")) var maxListLines: String?
    @Option(help: .setting("sitemap-max-depth")) var sitemapMaxDepth: String?
    @Option(help: .setting("sitemap-max-children")) var sitemapMaxChildren: String?
    @Option(help: .setting("max-active-lists")) var maxActiveLists: String?
    @Option(help: .setting("max-add-urls")) var maxAddUrls: String?
    @Option(help: .setting("max-queued")) var maxQueued: String?
    @Option(help: .setting("max-data-bytes")) var maxDataBytes: String?
    @Option(help: .setting("max-queued-bytes")) var maxQueuedBytes: String?
    @Option(help: .setting("max-queued-share")) var maxQueuedShare: String?
    @Option(help: .setting("http-listen")) var httpListen: String?
    @Option(help: .setting("http-allow-remote")) var httpAllowRemote: String?
    @Option(help: .setting("http-max-connections")) var httpMaxConnections: String?
    @Option(help: .setting("http-max-connections-per-peer")) var httpMaxConnectionsPerPeer: String?
    @Option(help: .setting("http-header-bytes")) var httpHeaderBytes: String?
    @Option(help: .setting("http-header-timeout")) var httpHeaderTimeout: String?
    @Option(help: .setting("http-idle-timeout")) var httpIdleTimeout: String?
    @Option(help: .setting("ready-lists")) var readyLists: [String] = []
    @Option(help: .setting("ready-fraction")) var readyFraction: String?
    @Option(help: .setting("courtesy")) var courtesy: String?
    @Option(help: .setting("courtesy-threshold")) var courtesyThreshold: String?
    @Option(help: .setting("courtesy-pressure")) var courtesyPressure: [String] = []
    @Option(help: .setting("quota-per-user")) var quotaPerUser: String?

    static let otherOptions: Set<String> = ["_config"]

    func run() async throws {
        let flags = settingFlags
        var environment: [String: String] = [:]
        var pointer = environ
        while let entry = pointer.pointee {
            let text = String(cString: entry)
            if let equals = text.firstIndex(of: "=") {
                environment[String(text[..<equals])] = String(text[text.index(after: equals)...])
            }
            pointer += 1
        }
        let status = await Daemon.run(DaemonOptions(configFile: config, flags: flags, environment: environment))
        if status != 0 { throw ExitCode(status) }
    }
}
