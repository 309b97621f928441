import Foundation
import ImgdTestSupport
@testable import ImgdDaemon
import ImgdNetwork
import ImgdStore
import Logging
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The configuration parser as the daemon calls it (`DaemonConfig.load`): the defaults every
/// setting has when nothing is given, each kind of setting from the file and from a flag, the
/// order of the layers, the bounds of each setting, values of the wrong kind, unknown keys, and
/// files that cannot be used. Real files in a scratch folder.
@Suite("Configuration: defaults, every kind of setting from the file and from flags, bounds and refusals", .offThePool)
struct DaemonConfigLoadingTests {
    static func load(_ text: String = "", flags: [(key: String, value: String)] = []) throws(ConfigError) -> DaemonConfig {
        try DaemonConfig.load(environment: [:], file: DaemonConfigTests.scratchFile("imgd.toml", text), flags: flags)
    }

    /// The working directory, as `load` makes relative folders absolute against it.
    static var here: String { FileManager.default.currentDirectoryPath }

    @Test("nothing given: every setting has its documented default (docs/settings.md's table, the types' doc comments)")
    func defaults() throws {
        let config = try Self.load()
        #expect(config.spool == Self.here + "/imgd-data/spool")
        #expect(config.cache == Self.here + "/imgd-data/cache")
        #expect(config.state == Self.here + "/imgd-data/state")
        #expect(config.socket == "./imgd-data/imgd.sock", "the socket stays as given (a Unix socket path is short)")
        #expect(config.diskLimit == 1 << 30)
        #expect(config.maxAge == .seconds(7 * 86_400))
        #expect(config.sweepInterval == .seconds(600))
        #expect(config.memoryLimit == 64 << 20)
        #expect(config.maxParallel == 8)
        #expect(config.maxPerHost == 4)
        #expect(config.attempts == 3)
        #expect(config.maxBodyBytes == 64 << 20)
        #expect(config.timeout == .seconds(120))
        #expect(config.proxy == nil)
        #expect(config.caFile == nil)
        #expect(config.deny.isEmpty)
        #expect(config.denyDefaults)
        #expect(config.maxConnections == 256)
        #expect(config.maxConnectionsPerPeer == 32)
        #expect(config.adminGroup == nil)
        #expect(config.pressureThreshold == 10)
        #expect(config.maxListBytes == 1 << 30)
        #expect(config.maxListLines == 10_000_000)
        #expect(config.maxAddURLs == 10_000)
        #expect(config.maxQueued == 100_000)
        #expect(config.maxQueuedBytes == 64 << 20)
        #expect(config.maxDataBytes == 4 << 20)
        // What the services are given from them.
        #expect(config.downloadPolicy.addresses.deniedRanges == AddressPolicy.default.deniedRanges)
        #expect(config.controlLimits.maxConnections == 256)
        #expect(config.heldRequestLimit == HeldRequestLimit(requests: 100_000, bytes: 64 << 20))
        #expect(config.maintenance.maxAge == .seconds(7 * 86_400) && config.maintenance.sweepInterval == .seconds(600))
    }

    @Test("systemd's directory variables choose the folders (the first of several); a file and flags still win over them")
    func systemdDirectories() throws {
        let environment = [
            "STATE_DIRECTORY": "/var/lib/imgd:/var/lib/other", "CACHE_DIRECTORY": "/var/cache/imgd",
            "RUNTIME_DIRECTORY": "/run/imgd",
        ]
        let config = try DaemonConfig.load(environment: environment, file: nil, flags: [])
        #expect(config.state == "/var/lib/imgd")
        #expect(config.spool == "/var/lib/imgd/spool")
        #expect(config.cache == "/var/cache/imgd")
        #expect(config.socket == "/run/imgd/imgd.sock")

        let file = DaemonConfigTests.scratchFile("imgd.toml", "cache = \"/srv/cache\"\n")
        let layered = try DaemonConfig.load(environment: environment, file: file, flags: [("socket", "/tmp/x.sock")])
        #expect(layered.cache == "/srv/cache" && layered.socket == "/tmp/x.sock" && layered.state == "/var/lib/imgd")
    }

    /// One setting of each kind, written in the file and as a flag's text, and what it becomes.
    struct Form: Sendable, CustomTestStringConvertible {
        let key: String
        let file: String
        let flag: String
        let check: @Sendable (DaemonConfig) -> Bool
        var testDescription: String { key }
    }

    static let forms: [Form] = [
        Form(key: "spool", file: "\"/srv/spool/\"", flag: "/srv/spool/") { $0.spool == "/srv/spool" },
        Form(key: "disk-limit", file: "\"1.5GiB\"", flag: "1.5GiB") { $0.diskLimit == 3 << 29 },
        Form(key: "memory-limit", file: "2097152", flag: "2097152") { $0.memoryLimit == 2 << 20 },
        Form(key: "max-age", file: "\"2h\"", flag: "2h") { $0.maxAge == .seconds(7200) },
        Form(key: "sweep-interval", file: "90", flag: "90") { $0.sweepInterval == .seconds(90) },
        Form(key: "max-parallel", file: "16", flag: "16") { $0.maxParallel == 16 },
        Form(key: "deny-defaults", file: "false", flag: "false") { !$0.denyDefaults },
        Form(key: "proxy", file: "\"http://proxy.test:3128\"", flag: "http://proxy.test:3128") {
            $0.proxy == "http://proxy.test:3128" && $0.downloadPolicy.proxy == "http://proxy.test:3128"
        },
        Form(key: "deny", file: "[\"10.0.0.0/8\", \"fd00::/8\"]", flag: "10.0.0.0/8,fd00::/8") { $0.deny == ["10.0.0.0/8", "fd00::/8"] },
        Form(key: "pressure-threshold", file: "12.5", flag: "12.5") { $0.pressureThreshold == 12.5 },
        Form(key: "log-level", file: "\"debug\"", flag: "debug") { $0.logLevel == .debug },
        Form(key: "admin-group", file: "\"root\"", flag: "root") { $0.adminGroup == AdminGroup(name: "root", gid: 0) },
    ]

    @Test("each kind of setting is read the same from the file and from a flag", arguments: forms)
    func bothLayers(_ form: Form) throws {
        let fromFile = try Self.load("\(form.key) = \(form.file)\n")
        #expect(form.check(fromFile), "from the file: \(fromFile)")
        let fromFlag = try Self.load(flags: [(form.key, form.flag)])
        #expect(form.check(fromFlag), "from the flag: \(fromFlag)")
        #expect(!form.check(try Self.load()), "the default already passes the check")
    }

    @Test("flags win over the file, and a later flag over an earlier one; an empty proxy or admin group means none")
    func layers() throws {
        let config = try Self.load(
            "max-parallel = 16\nmax-per-host = 2\nproxy = \"http://p.test:1\"\nadmin-group = \"root\"\n",
            flags: [("max-parallel", "32"), ("max-parallel", "12"), ("proxy", ""), ("admin-group", "")])
        #expect(config.maxParallel == 12)
        #expect(config.maxPerHost == 2, "a setting no flag names keeps the file's value")
        #expect(config.proxy == nil)
        #expect(config.adminGroup == nil)
    }

    @Test("proxy: schemes whose proxy resolves names are taken; socks4, socks and socks5 (resolved on imgd's host) are refused naming the scheme to use, from the file and from a flag, never echoing the URL")
    func proxySchemes() throws {
        for accepted in ["http://p.test:3128", "HTTPS://p.test", "socks4a://p.test:1080", "socks5h://user:pw@p.test:1080", "p.test:3128", "[::1]:3128"] {
            #expect(try Self.load("proxy = \"\(accepted)\"\n").proxy == accepted)
            #expect(try Self.load(flags: [("proxy", accepted)]).proxy == accepted)
        }
        for (refused, instead) in [
            ("socks5://user:s3cr3t@p.test:1080", "socks5h"), ("SOCKS5://p.test", "socks5h"), ("socks4://p.test", "socks4a"),
            ("socks://p.test", "socks4a"),
        ] {
            for fromFlag in [false, true] {
                do {
                    let config = fromFlag ? try Self.load(flags: [("proxy", refused)]) : try Self.load("# first\nproxy = \"\(refused)\"\n")
                    Issue.record("accepted \(refused): \(config)")
                } catch {
                    #expect(error.origin == "--proxy" || error.origin.hasSuffix("/imgd.toml:2"), "\(error)")
                    #expect(error.reason.hasPrefix("proxy: "), "\(error)")
                    #expect(error.reason.contains("use \(instead):// (the proxy resolves host names"), "\(error)")
                    #expect(!error.reason.contains("s3cr3t") && !error.reason.contains("p.test"), "\(error)")
                }
            }
        }
        for (refused, reason) in [
            ("gopher://p.test", "the scheme gopher is not a proxy's"), ("ftp.p.test:21", "the scheme ftp is not a proxy's"),
            ("http://", "not a proxy URL"),
        ] {
            #expect(throws: ConfigError.self, "\(refused)") { try Self.load(flags: [("proxy", refused)]) }
            do {
                _ = try Self.load(flags: [("proxy", refused)])
            } catch {
                #expect(error.reason.contains(reason), "\(error)")
            }
        }
    }

    @Test("the bounds of every bounded setting: the limit itself is taken", arguments: [
        ("disk-limit", "\"1MiB\""), ("max-age", "60"), ("sweep-interval", "1"), ("memory-limit", "0"),
        ("max-parallel", "1"), ("max-parallel", "1024"), ("max-per-host", "1024"), ("attempts", "1"), ("attempts", "10"),
        ("max-body-bytes", "1024"), ("timeout", "1"), ("max-connections", "100000"), ("max-connections-per-peer", "1"),
        ("pressure-threshold", "100"), ("pressure-threshold", "0.01"), ("max-list-bytes", "1"), ("max-list-lines", "1"),
        ("max-add-urls", "1000000"), ("max-queued", "1"), ("max-data-bytes", "0"), ("max-queued-bytes", "8192"),
    ])
    func atTheBound(key: String, value: String) throws {
        _ = try Self.load("\(key) = \(value)\n")
    }

    @Test("one step past a bound is refused, naming the setting and the bound, with FILE:LINE", arguments: [
        ("disk-limit", "\"1023KiB\"", "disk-limit: at least 1 MiB"),
        ("max-age", "59", "max-age: at least 60 s"),
        ("max-age", "\"59s\"", "max-age: at least 60 s"),
        ("sweep-interval", "0", "sweep-interval: at least 1 s"),
        ("memory-limit", "-1", "memory-limit: at least 0 B"),
        ("max-parallel", "0", "max-parallel: a whole number from 1 to 1024"),
        ("max-per-host", "1025", "max-per-host: a whole number from 1 to 1024"),
        ("attempts", "0", "attempts: a whole number from 1 to 10"),
        ("attempts", "11", "attempts: a whole number from 1 to 10"),
        ("max-body-bytes", "1023", "max-body-bytes: at least 1 KiB"),
        ("timeout", "0", "timeout: at least 1 s"),
        ("max-connections", "0", "max-connections: a whole number from 1 to 100000"),
        ("max-connections", "100001", "max-connections: a whole number from 1 to 100000"),
        ("max-connections-per-peer", "0", "max-connections-per-peer: a whole number from 1 to 100000"),
        ("pressure-threshold", "0", "pressure-threshold: a percentage above 0, at most 100"),
        ("pressure-threshold", "100.5", "pressure-threshold: a percentage above 0, at most 100"),
        ("log-level", "\"loud\"", "log-level: one of trace, debug, info, notice, warning, error, critical"),
        ("max-list-bytes", "0", "max-list-bytes: at least 1 B"),
        ("max-list-lines", "0", "max-list-lines: a whole number from 1 to 1000000000"),
        ("max-add-urls", "1000001", "max-add-urls: a whole number from 1 to 1000000"),
        ("max-queued", "0", "max-queued: a whole number from 1 to 100000000"),
        ("max-data-bytes", "-1", "max-data-bytes: at least 0 B"),
        ("max-queued-bytes", "8191", "max-queued-bytes: at least 8 KiB"),
    ])
    func pastTheBound(key: String, value: String, reason: String) {
        #expect(throws: ConfigError.self) { try Self.load("\(key) = \(value)\n") }
        do {
            _ = try Self.load("# a comment first\n\(key) = \(value)\n")
        } catch {
            #expect(error.origin.hasSuffix("/imgd.toml:2"), "\(error)")
            #expect(error.reason == reason, "\(error)")
        }
    }

    @Test("a value of the wrong kind names the setting, what it takes and what it got", arguments: [
        ("spool", "7", "spool: a string (in quotes), not an integer"),
        ("spool", "\"\"", "spool: an empty path"),
        ("disk-limit", "true", "disk-limit: a size such as \"512MiB\" or a number of bytes, not a boolean"),
        ("memory-limit", "[1]", "memory-limit: a size such as \"512MiB\" or a number of bytes, not an array"),
        ("max-age", "1.5", "max-age: a duration such as \"12h\" or a number of seconds, not a float"),
        ("timeout", "07:00:00", "timeout: a duration such as \"12h\" or a number of seconds, not a time"),
        ("max-parallel", "\"many\"", "max-parallel: a whole number from 1 to 1024"),
        ("attempts", "true", "attempts: a whole number from 1 to 10"),
        ("deny-defaults", "1", "deny-defaults: true or false"),
        ("deny", "7", "deny: a string (in quotes), not an integer"),
        ("deny", "[\"10.0.0.0/8\", 7]", "deny: a string (in quotes), not an integer"),
        ("pressure-threshold", "true", "pressure-threshold: a percentage above 0, at most 100"),
        ("admin-group", "0", "admin-group: a string (in quotes), not an integer"),
        ("ca-file", "false", "ca-file: a string (in quotes), not a boolean"),
        ("max-list-bytes", "{ bytes = 1 }", "max-list-bytes: a size such as \"512MiB\" or a number of bytes, not a table"),
    ])
    func wrongKind(key: String, value: String, reason: String) {
        do {
            let config = try Self.load("\(key) = \(value)\n")
            Issue.record("accepted: \(config)")
        } catch {
            #expect(error.origin.hasSuffix("/imgd.toml:1"), "\(error)")
            #expect(error.reason == reason, "\(error)")
        }
    }

    @Test("a flag's text that its setting cannot read is refused naming the flag", arguments: [
        ("disk-limit", "2 parsecs", "disk-limit: '2 parsecs' is not a size"),
        ("disk-limit", "1.5", "disk-limit: '1.5' is not a size: expected a whole number of bytes"),
        ("max-age", "soon", "max-age: 'soon' is not a duration"),
        ("max-parallel", "1.5", "max-parallel: a whole number from 1 to 1024"),
        ("max-parallel", "0x10", "max-parallel: a whole number from 1 to 1024"),
        ("deny-defaults", "yes", "deny-defaults: true or false"),
        ("deny", "10.0.0.0/8,not-a-range", "deny: not-a-range is not a CIDR range"),
        ("pressure-threshold", "high", "pressure-threshold: a percentage above 0, at most 100"),
        ("cache", "", "cache: an empty path"),
    ])
    func badFlag(key: String, text: String, reason: String) {
        do {
            let config = try Self.load(flags: [(key, text)])
            Issue.record("accepted: \(config)")
        } catch {
            #expect(error.origin == "--\(key)", "\(error)")
            #expect(error.reason.hasPrefix(reason), "\(error)")
        }
    }

    @Test("an unknown key, as a flag or in the file, is refused with the names that are known")
    func unknownKeys() {
        let known = DaemonConfig.settingNames.joined(separator: ", ")
        #expect(throws: ConfigError(origin: "--colour", reason: "unknown setting colour (known: \(known))")) {
            try Self.load(flags: [("colour", "blue")])
        }
        // A setting's name with a different case or spelling is unknown too: names are exact.
        do {
            _ = try Self.load("max-parallel = 4\nMax-Parallel = 4\n")
            Issue.record("accepted a differently cased name")
        } catch {
            #expect(error.origin.hasSuffix("/imgd.toml:2") && error.reason.hasPrefix("unknown setting Max-Parallel"), "\(error)")
        }
        do {
            _ = try Self.load("max_parallel = 4\n")
            Issue.record("accepted max_parallel")
        } catch {
            #expect(error.reason.hasPrefix("unknown setting max_parallel"), "\(error)")
        }
        // A dotted key is a table in TOML: refused as a table, not mistaken for a setting.
        do {
            _ = try Self.load("max.parallel = 4\n")
            Issue.record("accepted a dotted key")
        } catch {
            #expect(error.reason.hasPrefix("unknown table [max]"), "\(error)")
        }
    }

    @Test("the first setting that cannot be used stops the load: nothing after it is read")
    func firstRefusalWins() {
        do {
            _ = try Self.load("attempts = 99\ncolour = \"blue\"\n", flags: [("max-parallel", "0")])
            Issue.record("accepted")
        } catch {
            #expect(error.origin.hasSuffix("/imgd.toml:1") && error.reason.hasPrefix("attempts:"), "\(error)")
        }
    }

    @Test("files that cannot be used: missing, a folder, not UTF-8, over 1 MiB; the packaged path may be absent")
    func unusableFiles() throws {
        let folder = URL(fileURLWithPath: DaemonConfigTests.scratchFile("unused", "")).deletingLastPathComponent().path
        #expect(throws: ConfigError(origin: folder + "/none.toml", reason: "cannot read the configuration file: No such file or directory")) {
            try DaemonConfig.load(environment: [:], file: folder + "/none.toml", flags: [])
        }
        #expect(throws: ConfigError(origin: folder, reason: "cannot read the configuration file: Is a directory")) {
            try DaemonConfig.load(environment: [:], file: folder, flags: [])
        }
        let latin1 = folder + "/latin1.toml"
        #expect(FileManager.default.createFile(atPath: latin1, contents: Data([0x70, 0x72, 0x6F, 0x78, 0x79, 0x20, 0x3D, 0x20, 0x22, 0xE9, 0x22, 0x0A])))
        #expect(throws: ConfigError(origin: latin1, reason: "not UTF-8 text")) {
            try DaemonConfig.load(environment: [:], file: latin1, flags: [])
        }
        // Just over the cap, made of comments (valid TOML): refused for its size, not its text.
        let big = folder + "/big.toml"
        let line = "# " + String(repeating: "x", count: 1021) + "\n"
        #expect(FileManager.default.createFile(atPath: big, contents: Data(String(repeating: line, count: 1025).utf8)))
        #expect(throws: ConfigError(origin: big, reason: "larger than 1 MiB: not a configuration file")) {
            try DaemonConfig.load(environment: [:], file: big, flags: [])
        }
        let atCap = folder + "/at-cap.toml"
        #expect(FileManager.default.createFile(atPath: atCap, contents: Data(String(repeating: line, count: 1024).utf8)))
        _ = try DaemonConfig.load(environment: [:], file: atCap, flags: [])

        if !FileManager.default.fileExists(atPath: DaemonConfig.packagedConfigPath) {
            let config = try DaemonConfig.load(environment: [:], file: DaemonConfig.packagedConfigPath, flags: [("max-parallel", "2")])
            #expect(config.maxParallel == 2, "an absent packaged file is the defaults, flags still apply")
        }
    }

    @Test("folders are made absolute against the working directory; ./ and trailing slashes are dropped")
    func absolutePaths() {
        #expect(DaemonConfig.absolute("/srv/cache/") == "/srv/cache")
        #expect(DaemonConfig.absolute("/") == "/")
        #expect(DaemonConfig.absolute("./a/b//") == Self.here + "/a/b")
        #expect(DaemonConfig.absolute("././a") == Self.here + "/a")
        #expect(DaemonConfig.absolute(".") == Self.here)
        #expect(DaemonConfig.absolute("a") == Self.here + "/a")
    }
}
