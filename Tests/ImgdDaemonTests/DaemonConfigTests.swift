import Foundation
import ImgdTestSupport
@testable import ImgdDaemon
import ImgdNetwork
import Testing

/// The settings themselves: loaded from a TOML file and flags, with file and line for what
/// cannot be used; `ca-file`, `deny` and `deny-defaults`.
@Suite("Configuration: settings from the file and flags", .offThePool)
struct DaemonConfigTests {
    static func scratchFile(_ name: String, _ text: String) -> String {
        // Not throwing (callers throw ConfigError only): a folder that could not be made shows
        // as the file missing.
        let path = (try? ScratchFolder("imgd-config"))?.path(name) ?? "/nonexistent/" + name
        _ = FileManager.default.createFile(atPath: path, contents: Data(text.utf8))
        return path
    }

    static func load(_ text: String, flags: [(key: String, value: String)] = []) throws(ConfigError) -> (DaemonConfig, String) {
        let file = scratchFile("imgd.toml", text)
        return (try DaemonConfig.load(environment: [:], file: file, flags: flags), file)
    }

    @Test("any TOML form a setting can take: hex integers, multi-line and literal strings, comments, arrays over lines")
    func unusualButValid() throws {
        let (config, _) = try Self.load("""
            # imgd
            max-parallel = 0x10   # sixteen
            max-per-host = 0o3
            attempts = +2
            disk-limit = '''
            2MiB'''
            memory-limit = 1_048_576
            deny = [
              "10.0.0.0/8",  # the office
              '192.168.0.0/16',
            ]
            pressure-threshold = 2.5e1
            """)
        #expect(config.maxParallel == 16)
        #expect(config.maxPerHost == 3)
        #expect(config.attempts == 2)
        #expect(config.diskLimit == 2 << 20)
        #expect(config.memoryLimit == 1 << 20)
        #expect(config.deny == ["10.0.0.0/8", "192.168.0.0/16"])
        #expect(config.pressureThreshold == 25)
    }

    @Test("refused with FILE:LINE: invalid TOML, an unknown key, an unknown table, a value of the wrong kind", arguments: [
        ("max-parallel = 8\nmax-age = 01\n", 2, "leading zeros"),
        ("disk-limit = \"2MiB\"\ncolour = \"blue\"\n", 2, "unknown setting colour"),
        ("disk-limit = \"2MiB\"\n\n[origin.\"images.example.com\"]\nmax-per-host = 2\n", 3, "unknown table [origin]"),
        ("[[mirrors]]\nurl = \"x\"\n", 1, "unknown setting mirrors"),
        ("max-parallel = 2048\n", 1, "max-parallel: a whole number from 1 to 1024"),
        ("max-parallel = 1.5\n", 1, "max-parallel"),
        ("disk-limit = 1979-05-27\n", 1, "disk-limit: a size such as \"512MiB\" or a number of bytes, not a date"),
        ("proxy = 1\n", 1, "proxy: a string (in quotes), not an integer"),
        ("deny = [\"10.0.0.0/8\",\n  \"not-a-range\"]\n", 1, "not-a-range is not a CIDR range"),
        ("deny-defaults = \"no\"\n", 1, "deny-defaults: true or false"),
        ("ca-file = \"/nonexistent/ca.pem\"\n", 1, "ca-file: cannot read /nonexistent/ca.pem: No such file or directory"),
        ("ca-file = \"/\"\n", 1, "ca-file: / is not a regular file"),
    ])
    func refused(text: String, line: Int, mentions: String) {
        do {
            let (config, _) = try Self.load(text)
            Issue.record("accepted: \(config)")
        } catch {
            #expect(error.origin.hasSuffix("/imgd.toml:\(line)"), "\(error)")
            #expect(error.reason.contains(mentions), "\(error)")
        }
    }

    @Test("ca-file: a readable file is taken (absolute); a missing one is refused naming the flag; empty means the system store")
    func caFile() throws {
        let pem = Self.scratchFile("ca.pem", "-----BEGIN CERTIFICATE-----\n")
        let (config, _) = try Self.load("ca-file = \"\(pem)\"\n")
        #expect(config.caFile == pem)
        #expect(config.downloadPolicy.caFile == pem)

        let (none, _) = try Self.load("ca-file = \"\(pem)\"\n", flags: [("ca-file", "")])
        #expect(none.caFile == nil && none.downloadPolicy.caFile == nil, "an empty flag goes back to the system store")

        #expect(throws: ConfigError(origin: "--ca-file", reason: "ca-file: cannot read \(pem).gone: No such file or directory")) {
            try Self.load("", flags: [("ca-file", pem + ".gone")])
        }
        // Unreadable: a file without permissions (root reads everything, so only when not root).
        if getuid() != 0 {
            chmod(pem, 0)
            #expect(throws: ConfigError.self) { try Self.load("", flags: [("ca-file", pem)]) }
        }
    }

    @Test("deny adds to the default ranges; deny-defaults = false drops them; the default policy is the default list")
    func denyAndDefaults() throws {
        let defaults = AddressPolicy.default.deniedRanges
        let (plain, _) = try Self.load("")
        #expect(plain.downloadPolicy.addresses.deniedRanges == defaults)

        let (added, _) = try Self.load("deny = [\"10.0.0.0/8\"]\n")
        #expect(added.downloadPolicy.addresses.deniedRanges == defaults + [IPRange("10.0.0.0/8")!])

        let (only, _) = try Self.load("deny = [\"10.0.0.0/8\"]\ndeny-defaults = false\n")
        #expect(only.downloadPolicy.addresses.deniedRanges == [IPRange("10.0.0.0/8")!])

        let (none, _) = try Self.load("", flags: [("deny-defaults", "false")])
        #expect(none.downloadPolicy.addresses.deniedRanges.isEmpty)

        let (flagged, _) = try Self.load("deny-defaults = false\n", flags: [("deny", "10.0.0.0/8,fd00::/8"), ("deny-defaults", "true")])
        #expect(flagged.downloadPolicy.addresses.deniedRanges == defaults + [IPRange("10.0.0.0/8")!, IPRange("fd00::/8")!])
        #expect(throws: ConfigError(origin: "--deny-defaults", reason: "deny-defaults: true or false")) {
            try Self.load("", flags: [("deny-defaults", "maybe")])
        }
    }
}
