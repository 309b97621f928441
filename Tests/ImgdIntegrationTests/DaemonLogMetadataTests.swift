import Foundation
import ImgdTestSupport
import Testing

/// The log's metadata (docs/usage.md, *Logs*): every line about a list ends with its `list=`, every
/// change a client makes with its `peer=`, so one grep finds them whatever the text says.
@Suite("Daemon log metadata (the real imgd)", .serialized, .timeLimit(.minutes(5)), .offThePool)
struct DaemonLogMetadataTests {
    @Test("a list's lines carry list=NAME (quoted when it holds a space); a client's change carries peer=")
    func listAndPeer() async throws {
        let server = try await TestHTTPServer.start()
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let daemon = try await DaemonProcess.start(in: scratch.path)
        defer { if daemon.isRunning { kill(daemon.pid, SIGKILL) } }

        try daemon.drop("two words.txt", server.url("/img/a.png") + "\n")
        #expect(await daemon.finishedList("two words.txt") != nil, "log:\n\(daemon.log)")
        _ = try await daemon.result(#"{"cmd":"purge","tier":"memory"}"#)
        #expect(await daemon.stop() == 0, "log:\n\(daemon.log)")
        try await server.shutdown()

        let lines = daemon.log.split(separator: "\n").map(String.init)
        // The text says what happened; the metadata says to what (or by whom), once.
        #expect(lines.contains(#"imgd: list claimed: 1 line list="two words.txt""#), "log:\n\(daemon.log)")
        #expect(
            lines.contains { $0.hasPrefix("imgd: list done: ") && $0.hasSuffix(#" list="two words.txt""#) },
            "log:\n\(daemon.log)")
        #expect(
            lines.contains { $0.hasPrefix(#"imgd: purge: memory tier peer="pid "#) && $0.hasSuffix(#" uid \#(getuid()) gid \#(getgid())""#) },
            "log:\n\(daemon.log)")
        #expect(lines.filter { $0.contains("two words.txt") }.allSatisfy { $0.components(separatedBy: "two words.txt").count == 2 },
                "a line names its list twice; log:\n\(daemon.log)")
    }

    @Test("log-level: below it nothing is written; a reload to a lower level applies at once")
    func levelAndReload() async throws {
        let server = try await TestHTTPServer.start()
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let config = scratch.path + "/imgd.toml"
        try #"log-level = "warning""#.write(toFile: config, atomically: true, encoding: .utf8)
        let daemon = try await DaemonProcess.start(in: scratch.path, arguments: ["--config", config])
        defer { if daemon.isRunning { kill(daemon.pid, SIGKILL) } }

        try daemon.drop("quiet.txt", server.url("/img/q.png") + "\n")
        #expect(await daemon.finishedList("quiet.txt") != nil, "log:\n\(daemon.log)")
        #expect(!daemon.log.contains("imgd: ready") && !daemon.log.contains("list claimed: 1 line list=quiet.txt"), "log:\n\(daemon.log)")

        try #"log-level = "info""#.write(toFile: config, atomically: true, encoding: .utf8)
        kill(daemon.pid, SIGHUP)
        // The new level applies before the reload logs what it changed.
        #expect(await eventually(timeout: .seconds(20)) { daemon.log.contains("imgd: reloaded: log-level = info") }, "log:\n\(daemon.log)")
        try daemon.drop("heard.txt", server.url("/img/h.png") + "\n")
        #expect(await eventually(timeout: .seconds(20)) { daemon.log.contains("list claimed: 1 line list=heard.txt") }, "log:\n\(daemon.log)")
        #expect(await daemon.stop() == 0, "log:\n\(daemon.log)")
        #expect(daemon.log.contains("imgd: stopped"), "log:\n\(daemon.log)")
        try await server.shutdown()
    }
}
