import Foundation
import ImgdTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// What the daemon takes from the environment systemd gives a service, and how it stops: the
/// `STATE_DIRECTORY`, `CACHE_DIRECTORY` and `RUNTIME_DIRECTORY` folders, the log format
/// `JOURNAL_STREAM` switches to, and SIGINT as a graceful stop like SIGTERM.
@Suite("imgd under systemd's environment: *_DIRECTORY, JOURNAL_STREAM, SIGINT (the real binary)", .timeLimit(.minutes(10)), .offThePool)
struct DaemonSystemdEnvironmentTests {
    @Test("STATE_DIRECTORY (the first of a list), CACHE_DIRECTORY and RUNTIME_DIRECTORY: state and spool, cache, socket there, nothing under ./imgd-data; a flag still wins")
    func directoryVariables() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let state = scratch.path + "/var-lib-imgd", cache = scratch.path + "/var-cache-imgd", runtime = scratch.path + "/run-imgd"
        for folder in [state, cache, runtime] { try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: false) }
        // systemd lists several folders colon-separated when a unit names several.
        let environment = ["STATE_DIRECTORY": state + ":" + scratch.path + "/second-state", "CACHE_DIRECTORY": cache, "RUNTIME_DIRECTORY": runtime]
        try await withRunningServer { server in
            let socket = runtime + "/imgd.sock"
            let daemon = try await DaemonProcess.start(in: scratch.path, environment: environment, socket: socket)
            defer { if daemon.isRunning { kill(daemon.pid, SIGKILL) } }
            let status = try await daemon.result(#"{"cmd":"status"}"#)
            #expect(status["spool"] as? String == state + "/spool", "\(status)")
            #expect((status["cache"] as? [String: Any])?["path"] as? String == cache, "\(status)")
            #expect(daemon.log.contains("spool \(state)/spool, cache \(cache), state \(state), socket \(socket)"), "log:\n\(daemon.log)")

            // A list dropped in that spool is claimed; its image lands in that cache.
            let spool = state + "/spool"
            try Data((server.url("/img/systemd.png") + "\n").utf8).write(to: URL(fileURLWithPath: spool + "/.systemd.txt.tmp"))
            #expect(rename(spool + "/.systemd.txt.tmp", spool + "/systemd.txt") == 0)
            let list = await daemon.finishedList("systemd.txt")
            #expect(list?["state"] as? String == "done", "\(list ?? [:]); log:\n\(daemon.log)")
            #expect(FileManager.default.fileExists(atPath: spool + "/done/systemd.txt"))
            #expect(FileManager.default.fileExists(atPath: state + "/imgd-state.sqlite"), "no state database in STATE_DIRECTORY")
            #expect(FileManager.default.fileExists(atPath: cache + "/index.sqlite"), "no cache index in CACHE_DIRECTORY")
            #expect(scratch.files(under: "var-cache-imgd").count == 1, "\(scratch.files(under: "var-cache-imgd"))")
            #expect(!FileManager.default.fileExists(atPath: scratch.path + "/imgd-data"), "imgd made ./imgd-data as well")
            #expect(!FileManager.default.fileExists(atPath: scratch.path + "/second-state"), "imgd used the second STATE_DIRECTORY")
            #expect(await daemon.stop() == 0, "log:\n\(daemon.log)")
            #expect(!FileManager.default.fileExists(atPath: socket), "the socket file is left after a clean stop")

            // Flags win over the variables.
            let flagged = scratch.path + "/flagged-cache"
            let again = try await DaemonProcess.start(in: scratch.path, arguments: ["--cache", flagged], environment: environment, socket: socket)
            defer { if again.isRunning { kill(again.pid, SIGKILL) } }
            let flaggedStatus = try await again.result(#"{"cmd":"status"}"#)
            #expect((flaggedStatus["cache"] as? [String: Any])?["path"] as? String == flagged, "\(flaggedStatus)")
            #expect(flaggedStatus["spool"] as? String == state + "/spool", "\(flaggedStatus)")
            #expect(await again.stop() == 0, "log:\n\(again.log)")
        }
    }

    @Test("JOURNAL_STREAM naming stderr: every line starts with its priority (<6> info, <5> notice, <4> warning, <3> error) and not with imgd:; naming another file: plain imgd: lines")
    func journalStream() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        // The daemon's stderr is imgd.log, emptied in place at its start: same device and inode.
        let logPath = scratch.path + "/imgd.log"
        try #require(FileManager.default.createFile(atPath: logPath, contents: nil))
        let stream = try Self.journalStream(of: logPath)
        // /dev/null as the pressure source: a notice line that does not depend on the machine.
        let journal = ["JOURNAL_STREAM": stream, "MEMORY_PRESSURE_WATCH": "/dev/null"]

        let daemon = try await DaemonProcess.start(in: scratch.path, environment: journal)
        defer { if daemon.isRunning { kill(daemon.pid, SIGKILL) } }
        // A symlink dropped in the spool is refused with a warning.
        #expect(symlink("/etc/hostname", daemon.spool + "/link.txt") == 0)
        #expect(await daemon.report("link.txt", in: "failed") != nil, "no refusal report; log:\n\(daemon.log)")
        #expect(await daemon.stop() == 0, "log:\n\(daemon.log)")
        let lines = daemon.log.split(separator: "\n")
        #expect(!lines.isEmpty && lines.allSatisfy { $0.range(of: #"^<[3-7]>"#, options: .regularExpression) != nil }, "log:\n\(daemon.log)")
        #expect(lines.contains("<6>ready"), "log:\n\(daemon.log)")
        #expect(lines.contains("<5>memory pressure: disabled (MEMORY_PRESSURE_WATCH is /dev/null)"), "log:\n\(daemon.log)")
        #expect(lines.contains { $0.hasPrefix("<4>list refused in the spool: ") && $0.hasSuffix(" list=link.txt") }, "log:\n\(daemon.log)")

        // An error (a bad setting) at its priority, and the exit status for it.
        let refused = try await DaemonProcess.start(
            in: scratch.path, arguments: ["--disk-limit", "lots"], environment: journal, waitForSocket: false)
        #expect(await refused.waitForExit() == 2, "log:\n\(refused.log)")
        #expect(refused.log.hasPrefix("<3>") && refused.log.contains("disk-limit"), "log:\n\(refused.log)")

        // A JOURNAL_STREAM that is not our stderr (a shell redirected it): plain lines.
        let other = scratch.path + "/elsewhere"
        try #require(FileManager.default.createFile(atPath: other, contents: nil))
        let plain = try await DaemonProcess.start(
            in: scratch.path, environment: ["JOURNAL_STREAM": try Self.journalStream(of: other), "MEMORY_PRESSURE_WATCH": "/dev/null"])
        defer { if plain.isRunning { kill(plain.pid, SIGKILL) } }
        #expect(symlink("/etc/hostname", plain.spool + "/link2.txt") == 0)
        #expect(await plain.report("link2.txt", in: "failed") != nil, "no refusal report; log:\n\(plain.log)")
        #expect(await plain.stop() == 0, "log:\n\(plain.log)")
        let plainLines = plain.log.split(separator: "\n")
        #expect(plainLines.contains("imgd: ready"), "log:\n\(plain.log)")
        #expect(plainLines.contains { $0.hasPrefix("imgd: warning: list refused in the spool: ") && $0.hasSuffix(" list=link2.txt") }, "log:\n\(plain.log)")
        #expect(!plainLines.contains { $0.hasPrefix("<") }, "log:\n\(plain.log)")
    }

    @Test("SIGINT stops gracefully like SIGTERM: exit 0, the socket removed, the index closed cleanly, a list's pending URL resumed and finished at the next start")
    func sigint() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try await withRunningServer { server in
            let daemon = try await DaemonProcess.start(in: scratch.path)
            defer { if daemon.isRunning { kill(daemon.pid, SIGKILL) } }
            let held = "/img/held.png?gate=after-restart"
            try daemon.drop("interrupted.txt", server.url("/img/quick.png") + "\n" + server.url(held) + "\n")
            #expect(await eventually { server.requestCount(held) == 1 }, "the held URL was not asked for: \(server.requestLog)")
            let partway = await eventually(timeout: .seconds(20)) { try await daemon.list("interrupted.txt")?["cached"] as? Int == 1 }
            #expect(partway, "the quick URL was not cached; log:\n\(daemon.log)")

            #expect(await daemon.stop(SIGINT) == 0, "log:\n\(daemon.log)")
            #expect(daemon.log.contains("received SIGINT, stopping"), "log:\n\(daemon.log)")
            #expect(daemon.log.contains("imgd: stopped\n"), "log:\n\(daemon.log)")
            #expect(!FileManager.default.fileExists(atPath: daemon.socket), "the socket file is left after SIGINT")

            server.openGate("after-restart")
            let restarted = try await DaemonProcess.start(in: scratch.path)
            defer { if restarted.isRunning { kill(restarted.pid, SIGKILL) } }
            let list = await restarted.finishedList("interrupted.txt")
            #expect(list?["state"] as? String == "done" && list?["cached"] as? Int == 2, "\(list ?? [:]); log:\n\(restarted.log)")
            #expect(server.requestCount(held) == 2, "the pending URL was asked \(server.requestCount(held)) times")
            #expect(server.requestCount("/img/quick.png") == 1, "the cached URL was fetched again")
            #expect(!restarted.log.contains("did not stop cleanly"), "SIGINT left the index unclean:\n\(restarted.log)")
            #expect(await restarted.stop(SIGINT) == 0, "log:\n\(restarted.log)")
        }
    }

    /// `DEVICE:INODE` of `path`, as systemd writes `JOURNAL_STREAM`.
    static func journalStream(of path: String) throws -> String {
        var info = stat()
        guard stat(path, &info) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        return "\(info.st_dev):\(info.st_ino)"
    }
}
