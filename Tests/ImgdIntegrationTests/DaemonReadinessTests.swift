import Foundation
import ImgdTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Warm before ready: `ready-lists` and `ready-fraction`, `status.ready`, the `wait-ready`
/// command and `imgctl wait-ready`, through the real `imgd`, the real `imgctl` (a child process)
/// and the real test server holding some URLs behind a gate.
@Suite("Daemon readiness: ready-lists, status.ready, wait-ready (the real imgd)", .timeLimit(.minutes(10)), .offThePool)
struct DaemonReadinessTests {
    /// `count` image URLs of `server`, the last `held` of them waiting on the gate `hot`.
    static func hotSet(_ server: TestHTTPServer, count: Int, held: Int = 0, failing: Int = 0, tag: String = "r") -> String {
        (0..<count).map { index in
            if index >= count - failing { return server.url("/status/404?n=\(tag)\(index)") }
            let gate = index >= count - failing - held ? "?gate=hot" : ""
            return server.url("/img/\(tag)-\(index).png\(gate)")
        }.joined(separator: "\n") + "\n"
    }

    /// imgd's own stop deadline (`Daemon.stopDeadline`): a wait that held the control socket's
    /// drain would make the stop last this long.
    static let stopDeadline = Duration.seconds(5)

    static func ready(_ daemon: DaemonProcess) async throws -> [String: Any] {
        try await daemon.result(#"{"cmd":"status"}"#)["ready"] as? [String: Any] ?? [:]
    }

    /// The file's bytes and inode.
    static func identity(_ path: String) throws -> (Data, UInt64) {
        var info = stat()
        guard stat(path, &info) == 0 else { throw POSIXError(.ENOENT) }
        return (try Data(contentsOf: URL(fileURLWithPath: path)), UInt64(info.st_ino))
    }

    @Test("a hot set with 4 of 20 URLs behind a gate: not ready and imgctl wait-ready blocked; the gate opens: it exits 0, status.ready true; the ready list is untouched (same bytes, same inode); a restart is ready from disk without asking the origin")
    func gateThenReadyThenRestart() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try await withRunningServer { server in
            let list = try scratch.write("hot.txt", Self.hotSet(server, count: 20, held: 4))
            let before = try Self.identity(list)
            let daemon = try await DaemonProcess.start(in: scratch.path, arguments: ["--ready-lists", list])
            defer { daemon.killIfRunning() }
            // The 16 free URLs cached, the 4 held ones asked for and waiting.
            #expect(
                await eventually(timeout: .seconds(30)) { try await Self.ready(daemon)["cached"] as? Int == 16 }, "log: \(daemon.log)")
            #expect(await server.waitForInFlight(atLeast: 4, timeout: .seconds(10)))
            let waiting = try await Self.ready(daemon)
            #expect(waiting["ready"] as? Bool == false && waiting["total"] as? Int == 20 && waiting["needed"] as? Int == 20, "\(waiting)")
            let missing = waiting["missing"] as? [String] ?? []
            #expect(missing.count == 1 && missing[0].contains("16 of 20 URLs cached"), "\(missing)")
            let lists = waiting["lists"] as? [[String: Any]] ?? []
            #expect(lists.count == 1 && lists.first?["name"] as? String == list && lists.first?["state"] as? String == "warming", "\(lists)")

            let output = scratch.path + "/wait-ready.out"
            let waiter = try ChildProcess(
                BinaryRunner.imgctlPath, ["wait-ready", "--socket", daemon.socket], environment: DaemonProcess.environment(),
                stdout: .file(output), stderr: .file(output))
            defer { if waiter.isRunning { waiter.signal(SIGKILL) } }
            // Blocked: still waiting while the gate is shut (its request reached the daemon and
            // the answer it waits for is not there).
            // (Polled for 2 s: exited(within:) would kill it.)
            #expect(await !eventually(timeout: .seconds(2)) { !waiter.isRunning }, "wait-ready returned before the hot set was cached")
            #expect(try await Self.ready(daemon)["ready"] as? Bool == false)

            server.openGate("hot")
            let status = await waiter.exited(within: .seconds(30))
            #expect(status == 0, "wait-ready: \(String(describing: status)): \((try? String(contentsOfFile: output, encoding: .utf8)) ?? "")")
            #expect((try? String(contentsOfFile: output, encoding: .utf8))?.contains("ready: 20 of 20 URLs cached") == true)
            let ready = try await Self.ready(daemon)
            #expect(ready["ready"] as? Bool == true && ready["cached"] as? Int == 20 && (ready["missing"] as? [String])?.isEmpty == true, "\(ready)")
            #expect(await daemon.stop() == 0)
            // Read in place: the file is the same file with the same bytes, and nothing was left beside it.
            let after = try Self.identity(list)
            #expect(after.0 == before.0 && after.1 == before.1, "the ready list changed")
            #expect(try FileManager.default.contentsOfDirectory(atPath: scratch.path).filter { $0.hasPrefix("hot") } == ["hot.txt"])

            // A restart reads the list again and is ready from disk: the origin is not asked again.
            let asked = server.totalRequests
            let again = try await DaemonProcess.start(in: scratch.path, arguments: ["--ready-lists", list])
            defer { again.killIfRunning() }
            let run = try await BinaryRunner.imgctl(["wait-ready", "--socket", again.socket, "--timeout", "10s"], in: scratch.path)
            #expect(run.status == 0, "\(run.stderr)")
            #expect(server.totalRequests == asked, "the restart asked the origin again")
            #expect(await again.stop() == 0)
            #expect(try Self.identity(list).1 == before.1)
        }
    }

    @Test("ready-fraction 0.9 with 2 of 20 URLs failing: ready; 0.95: not_ready after --timeout 1s naming what is missing; a reload to 0.9 makes it ready at once")
    func fraction() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try await withRunningServer { server in
            let list = try scratch.write("hot.txt", Self.hotSet(server, count: 20, failing: 2))
            try scratch.write("imgd.toml", "ready-lists = [\"\(list)\"]\nready-fraction = 0.95\n")
            let daemon = try await DaemonProcess.start(in: scratch.path, arguments: ["--config", scratch.path + "/imgd.toml"])
            defer { daemon.killIfRunning() }
            #expect(
                await eventually(timeout: .seconds(30)) {
                    let ready = try await Self.ready(daemon)
                    return ready["cached"] as? Int == 18 && ready["failed"] as? Int == 2
                }, "log: \(daemon.log)")
            let started = ContinuousClock.now
            let run = try await BinaryRunner.imgctl(["wait-ready", "--socket", daemon.socket, "--timeout", "1s"], in: scratch.path)
            #expect(run.status == 1, "\(run.status) \(run.stdout) \(run.stderr)")
            #expect(ContinuousClock.now - started >= .milliseconds(900))
            #expect(run.stderr.contains("not_ready") && run.stderr.contains("18 of 20 URLs cached (2 failed), 19 needed"), "\(run.stderr)")
            #expect(try await Self.ready(daemon)["ready"] as? Bool == false)
            // The socket's own reply: the error code, and a bad timeout refused.
            let reply = try await daemon.call(#"{"cmd":"wait-ready","timeout":0}"#)
            #expect((reply["error"] as? [String: Any])?["code"] as? String == "not_ready", "\(reply)")
            let bad = try await daemon.call(#"{"cmd":"wait-ready","timeout":"soon"}"#)
            #expect((bad["error"] as? [String: Any])?["code"] as? String == "invalid_argument", "\(bad)")

            // The fraction applies at once; another list waits for a restart.
            try scratch.write("imgd.toml", "ready-lists = [\"\(list)\", \"/etc/imgd/other.txt\"]\nready-fraction = 0.9\n")
            let reload = try await BinaryRunner.imgctl(["reload", "--socket", daemon.socket], in: scratch.path)
            #expect(reload.status == 0, "\(reload.stderr)")
            #expect(reload.stdout.contains("reloaded: ready-fraction = 0.9"), "\(reload.stdout)")
            #expect(reload.stdout.contains("ready-lists changed to") && reload.stdout.contains("needs a restart"), "\(reload.stdout)")
            let ready = try await Self.ready(daemon)
            #expect(ready["ready"] as? Bool == true && ready["needed"] as? Int == 18 && ready["fraction"] as? Double == 0.9, "\(ready)")
            #expect((ready["lists"] as? [Any])?.count == 1)
            let now = try await BinaryRunner.imgctl(["wait-ready", "--socket", daemon.socket, "--timeout", "1s"], in: scratch.path)
            #expect(now.status == 0, "\(now.stderr)")
            #expect(await daemon.stop() == 0)
        }
    }

    @Test("a missing ready list, one writable by others and one owned by another uid: never ready, each named in missing with its reason; the good list is still warmed")
    func refusedLists() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try await withRunningServer { server in
            let good = try scratch.write("good.txt", Self.hotSet(server, count: 3))
            let open = try scratch.write("open.txt", Self.hotSet(server, count: 3, tag: "open"))
            chmod(open, 0o666)
            let foreign = try scratch.write("foreign.txt", Self.hotSet(server, count: 3, tag: "foreign"))
            chown(foreign, 65534, 65534)
            let absent = scratch.path + "/absent.txt"
            let daemon = try await DaemonProcess.start(
                in: scratch.path, arguments: ["--ready-lists", [good, absent, open, foreign].joined(separator: ",")])
            defer { daemon.killIfRunning() }
            #expect(
                await eventually(timeout: .seconds(30)) { try await Self.ready(daemon)["cached"] as? Int == 3 }, "log: \(daemon.log)")
            let ready = try await Self.ready(daemon)
            #expect(ready["ready"] as? Bool == false)
            let missing = ready["missing"] as? [String] ?? []
            #expect(missing.contains("\(absent): no such file"), "\(missing)")
            #expect(missing.contains { $0.hasPrefix(open + ": ") && $0.contains("writable by its group or by others") }, "\(missing)")
            #expect(missing.contains { $0.hasPrefix(foreign + ": ") && $0.contains("owned by uid 65534") }, "\(missing)")
            // Nothing of the refused lists was fetched.
            #expect(server.requestCount(prefix: "/img/open-") + server.requestCount(prefix: "/img/foreign-") == 0)
            let run = try await BinaryRunner.imgctl(["wait-ready", "--socket", daemon.socket, "--timeout", "1s"], in: scratch.path)
            #expect(run.status == 1 && run.stderr.contains("not_ready") && run.stderr.contains(absent), "\(run.stderr)")
            #expect(daemon.log.contains("ready list \(absent) refused: no such file"), "\(daemon.log)")
            #expect(await daemon.stop() == 0)
        }
    }

    @Test("careless settings refused at start: a relative ready list, a fraction of 1.5")
    func carelessSettings() async throws {
        try await expectConfigurationRefused("ready-lists = [\"hot.txt\"]\n", line: 1, mentions: "not an absolute path")
        try await expectConfigurationRefused("ready-fraction = 1.5\n", line: 1, mentions: "a fraction from 0.0 to 1.0")
    }

    @Test("no ready-lists: ready at start; imgctl wait-ready retries while the socket is missing, and exits 3 when it stays missing")
    func noListsAndUnreachable() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let socket = scratch.path + "/imgd-data/imgd.sock"
        // Started before the daemon: it retries connecting until the socket appears.
        let output = scratch.path + "/wait-ready.out"
        let waiter = try ChildProcess(
            BinaryRunner.imgctlPath, ["wait-ready", "--socket", socket, "--timeout", "30s"], environment: DaemonProcess.environment(),
            stdout: .file(output), stderr: .file(output))
        defer { if waiter.isRunning { waiter.signal(SIGKILL) } }
        let daemon = try await DaemonProcess.start(in: scratch.path)
        defer { daemon.killIfRunning() }
        let status = await waiter.exited(within: .seconds(30))
        #expect(status == 0, "\((try? String(contentsOfFile: output, encoding: .utf8)) ?? "")")
        let ready = try await Self.ready(daemon)
        #expect(ready["ready"] as? Bool == true && ready["total"] as? Int == 0 && (ready["lists"] as? [Any])?.isEmpty == true)
        #expect(await daemon.stop() == 0)
        let gone = try await BinaryRunner.imgctl(["wait-ready", "--socket", socket, "--timeout", "1s"], in: scratch.path)
        #expect(gone.status == 3, "\(gone.stderr)")
    }

    @Test("closing the connection ends a wait: with one connection per uid, a killed imgctl wait-ready frees its slot")
    func closedConnectionEndsTheWait() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try await withRunningServer { server in
            let list = try scratch.write("hot.txt", Self.hotSet(server, count: 2, held: 2))
            let daemon = try await DaemonProcess.start(
                in: scratch.path, arguments: ["--ready-lists", list, "--max-connections-per-peer", "1"])
            defer { daemon.killIfRunning() }
            let waiter = try ChildProcess(
                BinaryRunner.imgctlPath, ["wait-ready", "--socket", daemon.socket], environment: DaemonProcess.environment())
            defer { if waiter.isRunning { waiter.signal(SIGKILL) } }
            // It holds the uid's one connection: another is refused with busy.
            #expect(
                await eventually(timeout: .seconds(10)) {
                    let reply = try await daemon.call(#"{"cmd":"ping"}"#)
                    return (reply["error"] as? [String: Any])?["code"] as? String == "busy"
                })
            waiter.signal(SIGKILL)
            _ = await waiter.exited(within: .seconds(10))
            #expect(
                await eventually(timeout: .seconds(10)) { (try? await daemon.call(#"{"cmd":"ping"}"#))?["ok"] as? Bool == true },
                "the wait went on after its connection closed")
            server.openGate("hot")
            #expect(await daemon.stop() == 0)
        }
    }

    @Test("imgctl wait-ready tries again when imgd answers busy: with one connection per uid held by another client, it gets in once that one closes")
    func busyIsRetried() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let daemon = try await DaemonProcess.start(in: scratch.path, arguments: ["--max-connections-per-peer", "1"])
        defer { daemon.killIfRunning() }
        // The uid's one connection, held (a ping answered on it: admitted). The daemon may
        // not yet have seen the start-up probe's connection close, so a refusal is tried again.
        var holder: KeptConnection?
        let deadline = ContinuousClock.now + .seconds(10)
        while holder == nil, ContinuousClock.now < deadline {
            let candidate = try await KeptConnection(daemon.socket)
            if (try? await candidate.call(#"{"cmd":"ping"}"#))?["ok"] as? Bool == true { holder = candidate } else { try await Task.sleep(for: .milliseconds(20)) }
        }
        try #require(holder != nil, "no connection admitted within 10 s")
        let waiter = try ChildProcess(
            BinaryRunner.imgctlPath, ["wait-ready", "--socket", daemon.socket, "--timeout", "20s"], environment: DaemonProcess.environment(),
            stdout: .pipe, stderr: .pipe)
        defer { if waiter.isRunning { waiter.signal(SIGKILL) } }
        // Refused while the holder is open: it is still trying, not gone with an error.
        #expect(await !eventually(timeout: .seconds(1)) { !waiter.isRunning }, "imgctl gave up at the first busy")
        holder = nil
        #expect(await waiter.exited(within: .seconds(20)) == 0)
        #expect(await daemon.stop() == 0)
    }

    @Test("a stop while imgctl wait-ready waits: imgd stops within its deadline and imgctl exits 3 (imgd closed the connection)")
    func stopWhileWaiting() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try await withRunningServer { server in
            let list = try scratch.write("hot.txt", Self.hotSet(server, count: 2, held: 2))
            let daemon = try await DaemonProcess.start(in: scratch.path, arguments: ["--ready-lists", list])
            defer { daemon.killIfRunning() }
            #expect(await server.waitForInFlight(atLeast: 2, timeout: .seconds(10)))
            let output = scratch.path + "/wait-ready.out"
            let waiter = try ChildProcess(
                BinaryRunner.imgctlPath, ["wait-ready", "--socket", daemon.socket], environment: DaemonProcess.environment(),
                stdout: .file(output), stderr: .file(output))
            defer { if waiter.isRunning { waiter.signal(SIGKILL) } }
            #expect(await !eventually(timeout: .seconds(1)) { !waiter.isRunning })
            let stopped = await daemon.stop(SIGTERM, within: .seconds(30))
            #expect(stopped?.status == 0 && (stopped?.took ?? .seconds(99)) < Self.stopDeadline, "\(String(describing: stopped)); log: \(daemon.log)")
            let status = await waiter.exited(within: .seconds(10))
            #expect(status == 3, "\(String(describing: status)): \((try? String(contentsOfFile: output, encoding: .utf8)) ?? "")")
        }
    }

    @Test("a second uid: wait-ready tells it what status tells it, and no argument makes imgd read a file it names")
    func otherUser() async throws {
        guard OtherUser.available else { return }
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try await withRunningServer { server in
            let list = try scratch.write("hot.txt", Self.hotSet(server, count: 2, held: 2))
            // A list the member would like imgd to warm (or to confirm exists).
            let planted = try scratch.write("planted.txt", server.url("/img/planted.png") + "\n")
            // The socket in the scratch folder, which others may search (imgd-data/ is imgd's own).
            chmod(scratch.path, 0o755)
            let socket = scratch.path + "/imgd.sock"
            let daemon = try await DaemonProcess.start(
                in: scratch.path, arguments: ["--ready-lists", list, "--socket", socket], socket: socket)
            defer { daemon.killIfRunning() }
            try OtherUser.share(daemon.socket)
            let member = OtherUser.plain
            #expect(await server.waitForInFlight(atLeast: 2, timeout: .seconds(10)))
            let status = try await member.result(#"{"cmd":"status"}"#, socket: daemon.socket)
            let shown = status["ready"] as? [String: Any] ?? [:]
            let line = #"{"cmd":"wait-ready","timeout":"1s","list":"\#(planted)","path":"\#(planted)","ready-lists":["\#(planted)"]}"#
            let reply = try await member.call(line, socket: daemon.socket)
            let error = reply["error"] as? [String: Any] ?? [:]
            #expect(error["code"] as? String == "not_ready", "\(reply)")
            // What it says is what status.ready's missing says, nothing more.
            let message = error["message"] as? String ?? ""
            #expect(message == "not ready: " + (shown["missing"] as? [String] ?? []).joined(separator: "; "), "\(message) vs \(shown)")
            #expect(!message.contains("planted"))
            #expect(server.requestCount(prefix: "/img/planted") == 0, "imgd fetched a list a member named")
            server.openGate("hot")
            let result = try await member.result(#"{"cmd":"wait-ready","timeout":"30s"}"#, socket: daemon.socket)
            let after = try await member.result(#"{"cmd":"status"}"#, socket: daemon.socket)
            #expect(NSDictionary(dictionary: result) == NSDictionary(dictionary: after["ready"] as? [String: Any] ?? [:]))
            #expect(server.requestCount(prefix: "/img/planted") == 0)
            #expect(await daemon.stop() == 0)
        }
    }
}
