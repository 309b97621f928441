import Foundation
import ImgdCore
import ImgdTestSupport
import ImgdTOML
@testable import ImgdDaemon
import ImgdNetwork
import Logging
import Testing

/// What SIGHUP does with each setting, through ``ConfigReload``, which the daemon's reload
/// logs and then runs on: a reloadable setting's new value is logged and in effect; any other
/// is logged as needing a restart and the running value stays in effect.
@Suite("Configuration: a reload applies exactly the reloadable settings and logs the rest", .offThePool)
struct ConfigReloadTests {
    /// One setting changed from its default: the value in the file, and whether that value is
    /// what the daemon runs on (through what the services are given: policy, upkeep, fields).
    struct Change: Sendable, CustomTestStringConvertible {
        let key: String
        let value: TOMLValue
        let reloadable: Bool
        let inEffect: @Sendable (DaemonConfig) -> Bool

        var testDescription: String { "\(key) = \(value)" }
    }

    static let caFile: String = {
        let path = (try? ScratchFolder("imgd-reload"))?.path("ca.pem") ?? "/nonexistent/ca.pem"
        _ = FileManager.default.createFile(atPath: path, contents: Data("-----BEGIN CERTIFICATE-----\n".utf8))
        return path
    }()

    /// A headers file only this process's user may read (empty: no tables).
    static let headersFile: String = {
        let path = (try? ScratchFolder("imgd-reload"))?.path("headers.toml") ?? "/nonexistent/headers.toml"
        _ = FileManager.default.createFile(atPath: path, contents: Data(), attributes: [.posixPermissions: 0o600])
        return path
    }()

    static let changes: [Change] = [
        Change(key: "spool", value: .string("/elsewhere/spool"), reloadable: false) { $0.spool == "/elsewhere/spool" },
        Change(key: "cache", value: .string("/elsewhere/cache"), reloadable: false) { $0.cache == "/elsewhere/cache" },
        Change(key: "state", value: .string("/elsewhere/state"), reloadable: false) { $0.state == "/elsewhere/state" },
        Change(key: "socket", value: .string("/elsewhere/imgd.sock"), reloadable: false) { $0.socket == "/elsewhere/imgd.sock" },
        Change(key: "disk-limit", value: .string("3MiB"), reloadable: true) { $0.diskLimit == 3 << 20 },
        Change(key: "max-age", value: .string("2h"), reloadable: true) { $0.maintenance.maxAge == .seconds(7200) },
        Change(key: "sweep-interval", value: .integer(30), reloadable: true) { $0.maintenance.sweepInterval == .seconds(30) },
        Change(key: "refresh", value: .string("respect-headers"), reloadable: true) { $0.refreshPolicy.rule == .respectHeaders },
        Change(key: "min-fresh", value: .string("5m"), reloadable: true) { $0.refreshPolicy.minFresh == .seconds(300) },
        Change(key: "memory-limit", value: .string("1MiB"), reloadable: true) { $0.memoryLimit == 1 << 20 },
        Change(key: "max-parallel", value: .integer(0x10), reloadable: true) { $0.downloadPolicy.maxParallel == 16 },
        Change(key: "max-per-host", value: .integer(2), reloadable: true) { $0.downloadPolicy.maxPerHost == 2 },
        Change(key: "attempts", value: .integer(5), reloadable: true) { $0.downloadPolicy.retry.maxAttempts == 5 },
        Change(key: "max-body-bytes", value: .string("1MiB"), reloadable: true) { $0.downloadPolicy.maxBodyBytes == 1 << 20 },
        Change(key: "timeout", value: .string("30s"), reloadable: true) { $0.downloadPolicy.totalTimeout == .seconds(30) },
        Change(key: "max-rate", value: .string("20MB"), reloadable: true) { $0.downloadPolicy.maxRate == 20_000_000 },
        Change(key: "max-rate-applies-to", value: .string("all"), reloadable: true) { $0.downloadPolicy.maxRateAppliesTo == .all },
        Change(key: "proxy", value: .string("http://proxy.test:3128"), reloadable: false) {
            $0.downloadPolicy.proxy == "http://proxy.test:3128"
        },
        Change(key: "tier", value: .string("http://cache.site:8080/"), reloadable: true) {
            $0.downloadPolicy.tier?.base == "http://cache.site:8080"
        },
        Change(key: "tier-fallback", value: .boolean(false), reloadable: true) { !$0.tierFallback },
        Change(key: "ca-file", value: .string(caFile), reloadable: true) { $0.downloadPolicy.caFile == caFile },
        Change(key: "headers-file", value: .string(headersFile), reloadable: true) { $0.headersFile == headersFile },
        Change(key: "deny", value: .array([.string("10.0.0.0/8")]), reloadable: false) {
            $0.downloadPolicy.addresses.deniedRanges.contains(IPRange("10.0.0.0/8")!)
        },
        Change(key: "deny-defaults", value: .boolean(false), reloadable: false) {
            !$0.downloadPolicy.addresses.deniedRanges.contains(IPRange("169.254.0.0/16")!)
        },
        Change(key: "max-connections", value: .integer(8), reloadable: false) { $0.maxConnections == 8 },
        Change(key: "max-connections-per-peer", value: .integer(4), reloadable: false) { $0.controlLimits.maxConnectionsPerPeer == 4 },
        Change(key: "admin-group", value: .string("root"), reloadable: true) { $0.adminGroup == AdminGroup(name: "root", gid: 0) },
        Change(key: "pressure-threshold", value: .float(25.5), reloadable: false) { $0.pressureThreshold == 25.5 },
        Change(key: "log-level", value: .string("debug"), reloadable: true) { $0.logLevel == .debug },
        // Spool claims: what the claimer is given.
        Change(key: "max-list-bytes", value: .string("64MiB"), reloadable: true) { $0.spoolLimits.maxListBytes == 64 << 20 },
        Change(key: "max-list-lines", value: .integer(1000), reloadable: true) { $0.spoolLimits.maxListLines == 1000 },
        Change(key: "sitemap-max-depth", value: .integer(1), reloadable: true) { $0.spoolLimits.sitemapMaxDepth == 1 },
        Change(key: "sitemap-max-children", value: .integer(10), reloadable: true) { $0.spoolLimits.sitemapMaxChildren == 10 },
        Change(key: "max-active-lists", value: .integer(4), reloadable: true) { $0.warmingLimits.maxActiveLists == 4 },
        // Memory bounds on what clients ask for.
        Change(key: "max-add-urls", value: .integer(500), reloadable: true) { $0.maxAddURLs == 500 },
        Change(key: "max-queued", value: .integer(2_000), reloadable: true) { $0.maxQueued == 2_000 },
        Change(key: "max-data-bytes", value: .string("1MiB"), reloadable: true) { $0.maxDataBytes == 1 << 20 },
        // Memory bounds by bytes.
        Change(key: "max-queued-bytes", value: .string("16MiB"), reloadable: true) { $0.maxQueuedBytes == 16 << 20 },
        Change(key: "max-queued-share", value: .integer(50), reloadable: true) { $0.maxQueuedShare == 50 },
        Change(key: "http-listen", value: .string("127.0.0.1:8090"), reloadable: false) { $0.httpListen == .tcp(host: "127.0.0.1", port: 8090) },
        Change(key: "http-allow-remote", value: .boolean(true), reloadable: false) { $0.httpAllowRemote },
        Change(key: "http-max-connections", value: .integer(9), reloadable: false) { $0.httpLimits.maxConnections == 9 },
        Change(key: "http-max-connections-per-peer", value: .integer(3), reloadable: false) { $0.httpLimits.maxConnectionsPerPeer == 3 },
        Change(key: "http-header-bytes", value: .string("4KiB"), reloadable: false) { $0.httpLimits.maxHeaderBytes == 4096 },
        Change(key: "http-header-timeout", value: .string("3s"), reloadable: false) { $0.httpLimits.headerTimeout == .seconds(3) },
        Change(key: "http-idle-timeout", value: .string("30s"), reloadable: false) { $0.httpLimits.idleTimeout == .seconds(30) },
        // Readiness: the lists are read at start; the fraction is judged again at once.
        Change(key: "ready-lists", value: .array([.string("/etc/imgd/hot.txt")]), reloadable: false) {
            $0.readyLists == ["/etc/imgd/hot.txt"]
        },
        Change(key: "ready-fraction", value: .float(0.9), reloadable: true) { $0.readyFraction == 0.9 },
        // The courtesy loop: a reload changes its next turn.
        Change(key: "courtesy", value: .boolean(false), reloadable: true) { $0.courtesy == false },
        Change(key: "courtesy-threshold", value: .string("35%"), reloadable: true) { $0.courtesyThreshold == 35 },
        Change(key: "courtesy-pressure", value: .array([.string("/proc/pressure/cpu")]), reloadable: true) {
            $0.courtesyPressure == ["/proc/pressure/cpu"]
        },
        // Quotas per user: a lowered quota evicts its users down at once.
        Change(key: "quota-per-user", value: .string("2GiB"), reloadable: true) { $0.quotaPerUser == 2 << 30 },
    ]

    static let running = DaemonConfig(spool: "/srv/spool", cache: "/srv/cache", state: "/srv/state", socket: "/srv/imgd.sock")

    @Test("every setting has a reload test below, and no other name")
    func everySettingCovered() {
        #expect(Self.changes.map(\.key) == DaemonConfig.settingNames)
    }

    @Test("a changed setting, reloaded: logged as applied and in effect, or as needing a restart and kept", arguments: changes)
    func reloadOne(_ change: Change) throws {
        var loaded = Self.running
        try loaded.set(change.key, to: change.value, origin: "test.toml:1")
        #expect(change.inEffect(loaded), "the new value does not show in the loaded configuration")
        #expect(!change.inEffect(Self.running), "the test's new value is the running one")

        let reload = ConfigReload(running: Self.running, loaded: loaded)
        #expect(reload.changes.map(\.key) == [change.key], "changes: \(reload.changes)")
        #expect(reload.changes.first?.applied == change.reloadable)
        let messages = reload.messages
        #expect(messages.count == 1, "\(messages)")
        let message = try #require(messages.first)
        if change.reloadable {
            #expect(message.text.hasPrefix("reloaded: \(change.key) = "), "\(message.text)")
            #expect(message.level == .info)
            #expect(change.inEffect(reload.applied), "logged as applied, but the running value is still in effect")
            #expect(reload.applied == loaded)
        } else {
            #expect(message.text.hasPrefix("reloaded: \(change.key) changed to "), "\(message.text)")
            #expect(message.text.hasSuffix("but needs a restart; keeping the old value"), "\(message.text)")
            #expect(message.level == .warning)
            #expect(!change.inEffect(reload.applied), "logged as kept, but the new value is in effect")
            #expect(reload.applied == Self.running)
        }
    }

    @Test("every setting changed at once: each reloadable one applied, each other one kept")
    func reloadAll() throws {
        var loaded = Self.running
        for change in Self.changes { try loaded.set(change.key, to: change.value, origin: "test.toml:1") }
        let reload = ConfigReload(running: Self.running, loaded: loaded)
        #expect(reload.changes.count == Self.changes.count)
        for change in Self.changes {
            #expect(change.inEffect(reload.applied) == change.reloadable, "\(change.key)")
        }
        #expect(reload.messages.filter { $0.text.contains("needs a restart") }.count == Self.changes.filter { !$0.reloadable }.count)
    }

    @Test("a proxy's password is never logged: shown as …, and a change of the password alone is still told")
    func proxyPassword() throws {
        var first = Self.running
        try first.set("proxy", to: .string("http://fleet:hunter2@proxy.test:3128"), origin: "test.toml:1")
        var second = first
        try second.set("proxy", to: .string("http://fleet:s3cond@proxy.test:3128"), origin: "test.toml:1")
        for (running, loaded) in [(Self.running, first), (first, second)] {
            let texts = ConfigReload(running: running, loaded: loaded).messages.map(\.text)
            #expect(texts == ["reloaded: proxy changed to http://…@proxy.test:3128 but needs a restart; keeping the old value"], "\(texts)")
        }
        #expect(ProxyURL.redacted("socks5h://u@[::1]:1080/x@y") == "socks5h://…@[::1]:1080/x@y")
        #expect(ProxyURL.redacted("proxy.test:3128") == "proxy.test:3128")
    }

    @Test("nothing changed: one line saying so, and the running configuration stays")
    func nothingChanged() {
        let reload = ConfigReload(running: Self.running, loaded: Self.running)
        #expect(reload.changes.isEmpty)
        #expect(reload.messages.map(\.text) == ["reloaded: nothing changed"])
        #expect(reload.applied == Self.running)
    }

    @Test("host tables, changed: applied and logged with their patterns and header names, never a header's value")
    func hostTables() throws {
        var loaded = Self.running
        var table = HostSettings(pattern: try HostPattern("images.example.com"))
        table.headers = [try RequestHeader(name: "Authorization", value: "Bearer s3cr3t")]
        table.maxPerHost = 16
        loaded.hosts = [table]
        let reload = ConfigReload(running: Self.running, loaded: loaded)
        #expect(reload.applied.hosts == [table])
        #expect(reload.applied.downloadPolicy.hosts.rule(for: "images.example.com")?.maxPerHost == 16)
        #expect(reload.messages.map(\.text) == ["reloaded: host tables = images.example.com (max-per-host: 16; headers: Authorization)"])
        #expect(!reload.messages.contains { $0.text.contains("s3cr3t") })
    }
}
