import ArgumentParser
import ImgdDaemon

#if canImport(Glibc)
import Glibc
#endif

/// `imgd` (or `imgd run`): the daemon. Watches the spool, warms the cache, answers on the
/// control socket, until SIGTERM.
struct RunCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Run the daemon (the default when no command is given).",
        discussion: """
            With no flags, everything lives under ./imgd-data (spool/, cache/, state/, imgd.sock); \
            under systemd, the state in $STATE_DIRECTORY and the spool in $STATE_DIRECTORY/spool (the \
            packaged unit passes --spool /var/spool/imgd), the cache in $CACHE_DIRECTORY and \
            imgd.sock in $RUNTIME_DIRECTORY. Each \
            flag is also a top-level key of the --config file (TOML 1.0: disk-limit = "2GiB"); \
            flags win. SIGHUP reloads the file and applies limits, caps, timeouts, ca-file and \
            admin-group; \
            a changed folder, socket, max-connections, max-connections-per-peer, pressure-threshold, proxy, deny or \
            deny-defaults needs a restart. SIGTERM or SIGINT stops within 5 seconds. See Protocol.md.
            """)

    @Option(help: "Configuration file (TOML 1.0; every flag below is a top-level key).")
    var config: String?

    @Option(help: "Folder watched for link lists.") var spool: String?
    @Option(help: "The image cache folder.") var cache: String?
    @Option(help: "Folder of the state database.") var state: String?
    @Option(help: "The control socket's path.") var socket: String?
    @Option(help: "The cache's size cap (KiB, MiB, GiB, KB, MB, GB, or bytes; default 1GiB).") var diskLimit: String?
    @Option(help: "Entries unused this long are removed (30m, 12h, 7d; default 7d).") var maxAge: String?
    @Option(help: "How often the age sweep runs (default 10m).") var sweepInterval: String?
    @Option(help: "The memory tier's cap (default 64MiB).") var memoryLimit: String?
    @Option(help: "Transfers at once, in all (default 8).") var maxParallel: String?
    @Option(help: "Transfers at once to one host:port (default 4).") var maxPerHost: String?
    @Option(help: "Attempts per URL for transient failures (default 3).") var attempts: String?
    @Option(help: "Largest body accepted (default 64MiB).") var maxBodyBytes: String?
    @Option(help: "Time allowed for one attempt (default 120s).") var timeout: String?
    @Option(help: "Proxy URL (proxy environment variables are ignored).") var proxy: String?
    @Option(help: ArgumentHelp("A file of PEM certificates trusted for https instead of the system's store (a private CA).", valueName: "path"))
    var caFile: String?
    @Option(help: "Also refuse connections to this address range (CIDR); repeatable; added to the default list.")
    var deny: [String] = []
    @Option(help: ArgumentHelp(
        "Refuse the default ranges 169.254.0.0/16, 0.0.0.0/8, fe80::/10, fd00:ec2::254, 100.100.100.200 (default true; false leaves only --deny).",
        valueName: "true|false"))
    var denyDefaults: String?
    @Option(help: "Control socket connections at once (default 256; the last eighth only for users with none open).")
    var maxConnections: String?
    @Option(help: "Control socket connections one user (uid) may have open at once (default 32).")
    var maxConnectionsPerPeer: String?
    @Option(help: ArgumentHelp(
        "Group whose members may also run purge of the disk tier, evict, fsck, retry of everything and cancel of others' lists (default none: root and imgd's user only).",
        valueName: "name"))
    var adminGroup: String?
    @Option(help: "avg10 percentage counted as memory pressure when PSI triggers are refused (default 10).")
    var pressureThreshold: String?
    // Spool claims:
    @Option(help: "A list file larger than this when claimed is refused unread (default 1GiB).") var maxListBytes: String?
    @Option(help: "Entries read from one list, at most; the rest is a bad_list failure (default 10000000).")
    var maxListLines: String?
    // Memory bounds on what clients ask for.
    @Option(help: "URLs in one add request (default 10000).") var maxAddUrls: String?
    @Option(help: "Requests held for clients (add, get without waiting, list windows) before add, get without waiting and retry are refused with queue_full (default 100000).")
    var maxQueued: String?
    @Option(help: "Largest image get returns inline with data: true (default 4MiB; larger is too_large).") var maxDataBytes: String?
    // Memory bounds by bytes.
    @Option(help: "Bytes of the URLs of the held requests before add, get without waiting and retry are refused with queue_full (default 64MiB).")
    var maxQueuedBytes: String?

    func run() async throws {
        var flags: [(key: String, value: String)] = []
        let given: [(String, String?)] = [
            ("spool", spool), ("cache", cache), ("state", state), ("socket", socket), ("disk-limit", diskLimit),
            ("max-age", maxAge), ("sweep-interval", sweepInterval), ("memory-limit", memoryLimit),
            ("max-parallel", maxParallel), ("max-per-host", maxPerHost), ("attempts", attempts),
            ("max-body-bytes", maxBodyBytes), ("timeout", timeout), ("proxy", proxy), ("ca-file", caFile),
            ("deny", deny.isEmpty ? nil : deny.joined(separator: ",")), ("deny-defaults", denyDefaults),
            ("max-connections", maxConnections),
            ("max-connections-per-peer", maxConnectionsPerPeer), ("admin-group", adminGroup),
            ("pressure-threshold", pressureThreshold),
            ("max-list-bytes", maxListBytes), ("max-list-lines", maxListLines),
            ("max-add-urls", maxAddUrls), ("max-queued", maxQueued), ("max-data-bytes", maxDataBytes),
            ("max-queued-bytes", maxQueuedBytes),
        ]
        for (key, value) in given { if let value { flags.append((key, value)) } }
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
