import ArgumentParser
@testable import ImgdCLI
import ImgdDaemon
import ImgdNetwork
import ImgdTestSupport
import Testing

/// `imgd prefetch`'s settings are the daemon's: each option is a declared setting, with its
/// help, and its text goes through the setting's own parser, so `imgd run` and `imgd prefetch`
/// accept and refuse the same values with the same words.
@Suite("imgd prefetch: its options are the daemon's settings", .offThePool)
struct PrefetchOptionsTests {
    /// What `imgd run --NAME VALUE` answers: nil when the value is taken, else the refusal.
    static func runRefusal(_ name: String, _ value: String) -> String? {
        do {
            let flags = try RunCommand.parse(["--\(name)", value]).settingFlags
            _ = try DaemonConfig.load(environment: [:], file: nil, flags: flags)
            return nil
        } catch {
            return "\(error)"
        }
    }

    /// What `imgd prefetch l.txt --NAME VALUE` answers: nil when the value is taken, else the refusal.
    static func prefetchRefusal(_ name: String, _ value: String) -> String? {
        do {
            _ = try PrefetchCommand.parse(["l.txt", "--\(name)", value])
            return nil
        } catch {
            return PrefetchCommand.message(for: error)
        }
    }

    @Test("each option but the lists and --sync is a setting, named as it, in the table's order; no --memory-limit")
    func optionsAreSettings() throws {
        let command = try PrefetchCommand.parse(["l.txt"])
        let names = PrefetchCommand.settingOptions(of: command).map(\.name)
        #expect(names == DaemonConfig.settingNames.filter(Set(names).contains))
        #expect(names == [
            "cache", "disk-limit", "max-age", "max-parallel", "max-per-host", "attempts", "max-body-bytes", "timeout", "proxy",
            "ca-file", "deny", "deny-defaults",
        ])
        #expect(command.settingFlags.isEmpty)
        #expect(throws: (any Error).self) { try PrefetchCommand.parse(["l.txt", "--memory-limit", "64MiB"]) }
    }

    @Test("--help shows each setting's declared help and placeholder (the cache's default without systemd's)")
    func helpIsTheTables() throws {
        let help = RunCommandTests.collapsed(PrefetchCommand.helpMessage(columns: 100_000))
        let command = try PrefetchCommand.parse(["l.txt"])
        for name in PrefetchCommand.settingOptions(of: command).map(\.name) {
            let setting = try #require(DaemonConfig.setting(named: name))
            let usage = "--\(name) <\(setting.valueName ?? name)>"
            #expect(help.contains("\(usage) \(setting.help(underSystemd: false))"), "\(name)")
        }
        #expect(!help.contains("CACHE_DIRECTORY"))
    }

    @Test(
        "a value run refuses, prefetch refuses with the same words (the daemon's minima included)",
        arguments: [
            ("disk-limit", "100KB"), ("max-age", "30s"), ("timeout", "500ms"), ("max-body-bytes", "512"), ("max-parallel", "0"),
            ("max-per-host", "abc"), ("attempts", "11"), ("deny", "300.1.1.1/8"), ("deny-defaults", "yes"),
            ("proxy", "socks5://127.0.0.1:1080"), ("ca-file", "/nonexistent/ca.pem"), ("max-age", "soon"), ("cache", ""),
        ])
    func sameRefusals(name: String, value: String) throws {
        let run = try #require(Self.runRefusal(name, value), "run takes --\(name) \(value)")
        #expect(Self.prefetchRefusal(name, value) == run)
        #expect(run.hasPrefix("--\(name): "), "\(run)")
    }

    @Test("durations as the daemon reads them: --timeout 1.5s, 30s and a bare 30 (seconds) are taken by both")
    func durations() throws {
        for value in ["1.5s", "30s", "30", "2m"] {
            #expect(Self.runRefusal("timeout", value) == nil, "\(value)")
            #expect(Self.prefetchRefusal("timeout", value) == nil, "\(value)")
        }
        let command = try PrefetchCommand.parse(["l.txt", "--timeout", "1.5s"])
        #expect(try command.settings().downloadPolicy.totalTimeout == .milliseconds(1500))
    }

    @Test("the download policy is the daemon's projection of the same flags")
    func policyIsTheDaemons() throws {
        let arguments = [
            "--max-parallel", "3", "--max-per-host", "2", "--attempts", "5", "--max-body-bytes", "2MiB", "--timeout", "45s",
            "--proxy", "socks5h://127.0.0.1:1080", "--deny", "10.0.0.0/8", "--deny", "192.168.0.0/16", "--deny-defaults", "false",
        ]
        let prefetch = try PrefetchCommand.parse(["l.txt"] + arguments).settings()
        let run = try DaemonConfig.load(environment: [:], file: nil, flags: try RunCommand.parse(arguments).settingFlags)
        #expect(prefetch.downloadPolicy == run.downloadPolicy)
        #expect(prefetch.downloadPolicy.maxBodyBytes == 2 << 20 && prefetch.downloadPolicy.totalTimeout == .seconds(45))
        #expect(prefetch.downloadPolicy.addresses.deniedRanges.map(\.description) == ["10.0.0.0/8", "192.168.0.0/16"])
        // Without flags: the defaults, the cache folder outside systemd's.
        let plain = try PrefetchCommand.parse(["l.txt"]).settings()
        #expect(plain.cache == "./imgd-data/cache")
        #expect(plain.downloadPolicy == DaemonConfig.embedded(environment: [:]).downloadPolicy)
    }
}
