import Foundation
import ImgdTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A reload that fails (docs/usage.md, *Signals*; Protocol.md, `reload`): the running settings stay,
/// `status.degraded` names the failure and its cause until a reload succeeds, and the unit's
/// `ExecReload=` command — run here exactly as the unit writes it, against the test daemon —
/// exits non-zero, so `systemctl reload` fails.
@Suite("Reload: a failure shows in status.degraded and fails ExecReload", .timeLimit(.minutes(10)), .offThePool)
struct DaemonReloadTests {
    /// The unit's `ExecReload=` line, split into words, pointed at the built imgctl and `socket`.
    static func execReload(socket: String) throws -> [String] {
        let unit = try SystemdUnitTests.text("imgd.service")
        let line = try #require(unit.split(separator: "\n").first { $0.hasPrefix("ExecReload=") }, "no ExecReload= in imgd.service")
        var words = line.dropFirst("ExecReload=".count).split(separator: " ").map(String.init)
        #expect(words.first == "/usr/bin/imgctl", "ExecReload= runs \(words)")
        #expect(words.contains("/run/imgd/imgd.sock"), "ExecReload= does not name imgd.socket's path: \(words)")
        words[0] = BinaryRunner.imgctlPath
        return words.map { $0 == "/run/imgd/imgd.sock" ? socket : $0 }
    }

    /// Runs the unit's `ExecReload=` command against `daemon`.
    static func reload(_ daemon: DaemonProcess) async throws -> ChildProcess.Output {
        let command = try execReload(socket: daemon.socket)
        return try await ChildProcess.run(
            command[0], Array(command.dropFirst()), in: "/", environment: BinaryRunner.imgctlEnvironment, timeout: .seconds(60))
    }

    /// `status.degraded`'s entries.
    static func degraded(_ daemon: DaemonProcess) async throws -> [[String: Any]] {
        try await daemon.result(#"{"cmd":"status"}"#)["degraded"] as? [[String: Any]] ?? []
    }

    @Test("bad TOML, then a headers-file readable by others: ExecReload exits 1, status.degraded names the failure and its cause, the running settings stay; a good reload clears it")
    func failedReload() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try scratch.write("imgd.toml", "max-parallel = 3\n")
        let daemon = try await DaemonProcess.start(in: scratch.path, arguments: ["--config", scratch.path + "/imgd.toml"])
        #expect(try await Self.degraded(daemon).isEmpty)

        try scratch.write("imgd.toml", "max-parallel = = 4\n")
        let bad = try await Self.reload(daemon)
        #expect(bad.status != 0, "ExecReload succeeded: \(bad.stdout)")
        #expect(bad.stderr.contains("reload_failed") && bad.stderr.contains("imgd.toml:1"), "\(bad.stderr)")
        var entries = try await Self.degraded(daemon)
        #expect(entries.map { $0["code"] as? String } == ["reload_failed"], "\(entries)")
        #expect((entries.first?["message"] as? String)?.contains("imgd.toml:1") == true, "\(entries)")

        // A SIGHUP with the same trouble says the same; the running settings stayed.
        kill(daemon.pid, SIGHUP)
        #expect(await eventually(timeout: .seconds(10)) { daemon.log.components(separatedBy: "reload failed").count >= 3 }, "\(daemon.log)")
        #expect(try await Self.degraded(daemon).map { $0["code"] as? String } == ["reload_failed"])

        // Another cause replaces the first: a headers-file open to others.
        let secrets = scratch.path + "/secrets.toml"
        try scratch.write("secrets.toml", "[host.\"h.example\"]\nheaders = { X-Api-Key = \"k3y\" }\n")
        #expect(chmod(secrets, 0o644) == 0)
        try scratch.write("imgd.toml", "max-parallel = 4\nheaders-file = \"\(secrets)\"\n")
        let open = try await Self.reload(daemon)
        #expect(open.status != 0)
        #expect(open.stderr.contains("chmod 600 it") && !open.stderr.contains("k3y"), "\(open.stderr)")
        entries = try await Self.degraded(daemon)
        #expect(entries.count == 1 && (entries.first?["message"] as? String)?.contains("chmod 600 it") == true, "\(entries)")

        // Mended: the reload applies, says what changed, and the degradation is gone.
        #expect(chmod(secrets, 0o600) == 0)
        let good = try await Self.reload(daemon)
        #expect(good.status == 0, "\(good.stderr)")
        #expect(good.stdout.contains("max-parallel"), "\(good.stdout)")
        #expect(try await Self.degraded(daemon).isEmpty)
        #expect(daemon.log.contains("recovered: reload_failed cleared"), "\(daemon.log)")
        #expect(await daemon.stop() == 0)
    }

    @Test(
        "reload is for root, imgd's user and admin-group: a plain member of the socket's group gets forbidden and nothing is reloaded",
        .enabled(if: OtherUser.available, "needs root and util-linux's setpriv"))
    func reloadIsPrivileged() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        chmod(scratch.path, 0o755)
        try scratch.write("imgd.toml", "max-parallel = 3\n")
        let socket = scratch.path + "/imgd.sock"
        let daemon = try await DaemonProcess.start(
            in: scratch.path, arguments: ["--config", scratch.path + "/imgd.toml", "--socket", socket], socket: socket)
        try OtherUser.share(socket)
        try scratch.write("imgd.toml", "max-parallel = = 4\n")
        let run = try await OtherUser.plain.imgctl(["reload"], socket: socket)
        #expect(run.status != 0)
        #expect(run.stderr.contains("imgctl: forbidden: reload is allowed only to"), "\(run.stderr)")
        #expect(try await Self.degraded(daemon).isEmpty, "a refused reload read nothing")
        #expect(await daemon.stop() == 0)
    }
}
