import Foundation
import ImgdCore
import ImgdTestSupport
import Synchronization
import Testing

/// How many lists the spool warms at once (`max-active-lists`) and how many of their URLs it
/// holds (`max-queued`): the real `imgd`, the real test server holding every request on a gate
/// that opens only when the test says (an origin that never answers, until it does).
///
/// Serialized: each test watches `status` back to back for its whole length.
@Suite("Daemon spool: lists warmed at once (the real imgd)", .serialized, .timeLimit(.minutes(10)), .offThePool)
struct DaemonSpoolCapTests {
    @Test("5 lists, max-active-lists 2, max-queued 16, an origin that holds every request: 2 lists warmed, 3 waiting in claim order with their positions; queued never past 16; a waiting list cancels, a cancelled active one hands its turn on; all finish once the origin answers")
    func capAndTurns() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try await withRunningServer { server in
            let daemon = try await DaemonProcess.start(
                in: scratch.path, arguments: ["--max-active-lists", "2", "--max-queued", "16"])
            defer { daemon.killIfRunning() }
            let watch = StatusWatch(daemon)
            let names = ["a.txt", "b.txt", "c.txt", "d.txt", "e.txt"]
            for name in names {
                try daemon.drop(name, Self.heldURLs(server, list: name, count: 30))
                // One at a time: the claim order is the drop order.
                #expect(await eventually(timeout: .seconds(10)) { try await daemon.list(name) != nil }, "log: \(daemon.log)")
            }
            #expect(
                await eventually(timeout: .seconds(10)) {
                    try await Self.states(daemon) == [
                        "a.txt": "active", "b.txt": "active", "c.txt": "waiting #1", "d.txt": "waiting #2", "e.txt": "waiting #3",
                    ]
                }, "log: \(daemon.log)")
            // The held requests reached the origin: the active lists' windows are out.
            #expect(await server.waitForInFlight(atLeast: 4, timeout: .seconds(10)))
            let status = try await daemon.result(#"{"cmd":"status"}"#)
            #expect(status["lists_active"] as? Int == 2 && status["lists_waiting"] as? Int == 3, "\(status)")
            // Nothing of the waiting lists was asked for.
            #expect(server.requestCount(prefix: "/img/c-") + server.requestCount(prefix: "/img/d-") == 0)

            // A waiting list cancels at once: all its URLs failed as cancelled, its report in failed/.
            let cancelled = try await daemon.result(#"{"cmd":"cancel","list":"d.txt"}"#)
            #expect(cancelled["cancelled"] as? Int == 30)
            let d = try #require(await daemon.finishedList("d.txt"), "log: \(daemon.log)")
            #expect(d["state"] as? String == "cancelled" && d["failed"] as? Int == 30)
            #expect(await daemon.report("d.txt", in: "failed") != nil)
            #expect(try await Self.states(daemon).filter { $0.value.hasPrefix("waiting") } == ["c.txt": "waiting #1", "e.txt": "waiting #2"])

            // An active list cancelled hands its turn to the list that waited longest.
            _ = try await daemon.result(#"{"cmd":"cancel","list":"a.txt"}"#)
            #expect(
                await eventually(timeout: .seconds(10)) {
                    let states = try await Self.states(daemon)
                    return states["b.txt"] == "active" && states["c.txt"] == "active" && states["e.txt"] == "waiting #1"
                }, "log: \(daemon.log)")

            // The origin answers: every list left finishes, with its report.
            server.openGate("go")
            for name in ["b.txt", "c.txt", "e.txt"] {
                let list = try #require(await daemon.finishedList(name, timeout: .seconds(60)), "\(name); log: \(daemon.log)")
                #expect(list["state"] as? String == "done" && list["cached"] as? Int == 30, "\(list)")
                #expect(await daemon.report(name, in: "done") != nil)
            }
            let seen = await watch.finish()
            #expect(seen.samples > 10)
            #expect(seen.mostActive <= 2, "lists_active reached \(seen.mostActive)")
            #expect(seen.mostQueued <= 16, "queued reached \(seen.mostQueued) (max-queued 16)")
            #expect(await daemon.stop() == 0)
        }
    }

    @Test("a restart resumes the waiting lists behind the cap, in claim order; a reload raising max-active-lists starts them")
    func restartAndReload() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        // max-per-host and max-parallel 16: every request of the lists' windows reaches the origin.
        try scratch.write("imgd.toml", "max-active-lists = 1\nmax-queued = 8\nmax-per-host = 16\nmax-parallel = 16\n")
        let arguments = ["--config", scratch.path + "/imgd.toml"]
        try await withRunningServer { server in
            var daemon = try await DaemonProcess.start(in: scratch.path, arguments: arguments)
            defer { daemon.killIfRunning() }
            for name in ["a.txt", "b.txt", "c.txt"] {
                try daemon.drop(name, Self.heldURLs(server, list: name, count: 20))
                #expect(await eventually(timeout: .seconds(10)) { try await daemon.list(name) != nil }, "log: \(daemon.log)")
            }
            let expected = ["a.txt": "active", "b.txt": "waiting #1", "c.txt": "waiting #2"]
            #expect(await eventually(timeout: .seconds(10)) { try await Self.states(daemon) == expected }, "log: \(daemon.log)")
            #expect(await daemon.stop() == 0)

            daemon = try await DaemonProcess.start(in: scratch.path, arguments: arguments)
            let watch = StatusWatch(daemon)
            #expect(await eventually(timeout: .seconds(10)) { try await Self.states(daemon) == expected }, "log: \(daemon.log)")
            #expect(await server.waitForInFlight(atLeast: 1, timeout: .seconds(10)))
            #expect(server.requestCount(prefix: "/img/b-") + server.requestCount(prefix: "/img/c-") == 0)

            try scratch.write("imgd.toml", "max-active-lists = 3\nmax-queued = 8\nmax-per-host = 16\nmax-parallel = 16\n")
            kill(daemon.pid, SIGHUP)
            #expect(
                await eventually(timeout: .seconds(10)) {
                    try await Self.states(daemon) == ["a.txt": "active", "b.txt": "active", "c.txt": "active"]
                }, "log: \(daemon.log)")
            #expect(await eventually(timeout: .seconds(10)) { server.requestCount(prefix: "/img/c-") > 0 }, "log: \(daemon.log)")

            server.openGate("go")
            for name in ["a.txt", "b.txt", "c.txt"] {
                let list = try #require(await daemon.finishedList(name, timeout: .seconds(60)), "\(name); log: \(daemon.log)")
                #expect(list["state"] as? String == "done" && list["cached"] as? Int == 20, "\(list)")
            }
            let seen = await watch.finish()
            #expect(seen.mostQueued <= 8, "queued reached \(seen.mostQueued) (max-queued 8)")
            #expect(await daemon.stop() == 0)
        }
    }

    @Test("with the default cap (16) and more lists, each list's window shrinks so that all of them stay within max-queued")
    func windowsShrinkToFit() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try await withRunningServer { server in
            // 20 lists of 100 held URLs: 2,000 held without a cap on windows; max-queued is 320.
            let daemon = try await DaemonProcess.start(in: scratch.path, arguments: ["--max-queued", "320"])
            defer { daemon.killIfRunning() }
            let watch = StatusWatch(daemon)
            let names = (0..<20).map { "w\($0).txt" }
            for name in names { try daemon.drop(name, Self.heldURLs(server, list: name, count: 100)) }
            #expect(
                await eventually(timeout: .seconds(30)) {
                    let status = try await daemon.result(#"{"cmd":"status"}"#)
                    return status["lists_active"] as? Int == 16 && status["lists_waiting"] as? Int == 4
                }, "log: \(daemon.log)")
            // Every active list has its share out: 16 × 20 = 320 requests held.
            #expect(
                await eventually(timeout: .seconds(30)) {
                    let status = try await daemon.result(#"{"cmd":"status"}"#)
                    return (status["queued"] as? Int ?? 0) + (status["in_flight"] as? Int ?? 0) >= 300
                }, "log: \(daemon.log)")
            server.openGate("go")
            for name in names {
                let list = try #require(await daemon.finishedList(name, timeout: .seconds(120)), "\(name); log: \(daemon.log)")
                #expect(list["state"] as? String == "done", "\(list)")
            }
            let seen = await watch.finish()
            #expect(seen.mostActive <= 16, "lists_active reached \(seen.mostActive)")
            #expect(seen.mostQueued <= 320, "queued reached \(seen.mostQueued) (max-queued 320)")
            #expect(await daemon.stop() == 0)
        }
    }

    @Test(
        "a second uid cannot cancel another user's waiting list: forbidden, and the list keeps its place; its owner can",
        .enabled(if: OtherUser.available, "needs root and util-linux's setpriv to run imgctl as a second uid"))
    func waitingListOfAnotherUser() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        chmod(scratch.path, 0o755)
        let socket = scratch.path + "/imgd.sock"
        try await withRunningServer { server in
            let daemon = try await DaemonProcess.start(
                in: scratch.path, arguments: ["--socket", socket, "--max-active-lists", "1", "--max-queued", "8"], socket: socket)
            defer { daemon.killIfRunning() }
            try OtherUser.share(socket)
            for name in ["a.txt", "b.txt"] {
                try daemon.drop(name, Self.heldURLs(server, list: name, count: 10))
                #expect(await eventually(timeout: .seconds(10)) { try await daemon.list(name) != nil }, "log: \(daemon.log)")
            }
            #expect(await eventually(timeout: .seconds(10)) { try await Self.states(daemon) == ["a.txt": "active", "b.txt": "waiting #1"] }, "log: \(daemon.log)")

            let refused = try await OtherUser.plain.imgctl(["cancel", "--list", "b.txt"], socket: socket)
            #expect(refused.status == 1 && refused.stderr.contains("imgctl: forbidden: "), "exit \(refused.status): \(refused.stderr)")
            #expect(try await Self.states(daemon) == ["a.txt": "active", "b.txt": "waiting #1"])

            let cancelled = try await daemon.result(#"{"cmd":"cancel","list":"b.txt"}"#)
            #expect(cancelled["cancelled"] as? Int == 10)
            server.openGate("go")
            let a = try #require(await daemon.finishedList("a.txt", timeout: .seconds(60)), "log: \(daemon.log)")
            #expect(a["state"] as? String == "done")
            #expect(await daemon.stop() == 0)
        }
    }

    @Test(
        "a free turn goes to the owner with the fewest lists warmed: one member's lists dropped first do not keep another's waiting",
        .enabled(if: OtherUser.available, "needs root and util-linux's setpriv to act as a second uid"))
    func turnsShared() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try await withRunningServer { server in
            let daemon = try await DaemonProcess.start(in: scratch.path, arguments: ["--max-active-lists", "2"])
            defer { daemon.killIfRunning() }
            // The member's three lists come first (two warm, one waits), then root's.
            for (name, gate) in [("m1.txt", "m1"), ("m2.txt", "m2"), ("m3.txt", "later")] {
                try daemon.drop(name, server.url("/img/\(Self.stem(name)).png?gate=\(gate)") + "\n", owner: OtherUser.uid)
                #expect(await eventually(timeout: .seconds(10)) { try await daemon.list(name) != nil }, "log: \(daemon.log)")
            }
            try daemon.drop("r1.txt", server.url("/img/r1.png?gate=later") + "\n")
            #expect(await eventually(timeout: .seconds(10)) {
                try await Self.states(daemon) == ["m1.txt": "active", "m2.txt": "active", "m3.txt": "waiting #1", "r1.txt": "waiting #2"]
            }, "log: \(daemon.log)")
            // m1 finishes: the member still has m2 warmed, root none, so root's list goes first.
            server.openGate("m1")
            _ = try #require(await daemon.finishedList("m1.txt", timeout: .seconds(60)))
            #expect(await eventually(timeout: .seconds(10)) { try await Self.states(daemon)["r1.txt"] == "active" }, "log: \(daemon.log)")
            #expect(try await Self.states(daemon)["m3.txt"] == "waiting #1")
            server.openGate("m2")
            server.openGate("later")
            for name in ["m2.txt", "m3.txt", "r1.txt"] {
                _ = try #require(await daemon.finishedList(name, timeout: .seconds(60)), "\(name): \(daemon.log)")
            }
            #expect(await daemon.stop() == 0)
        }
    }

    // MARK: - Helpers

    /// A list of `count` URLs on `server`, each held until the gate `go` opens: `/img/a-N.png`
    /// for the list `a.txt`.
    static func heldURLs(_ server: TestHTTPServer, list: String, count: Int) -> String {
        (0..<count).map { server.url("/img/\(stem(list))-\($0).png?gate=go") }.joined(separator: "\n") + "\n"
    }

    /// `a` for `a.txt`.
    static func stem(_ list: String) -> String { String(list.prefix { $0 != "." }) }

    /// The lists in progress, by name: their state, with the position of a waiting one ("waiting #2").
    static func states(_ daemon: DaemonProcess) async throws -> [String: String] {
        var states: [String: String] = [:]
        for list in try await daemon.lists() {
            guard let name = list["name"] as? String, let state = list["state"] as? String,
                !["done", "failed", "cancelled"].contains(state)
            else { continue }
            states[name] = state + ((list["position"] as? Int).map { " #\($0)" } ?? "")
        }
        return states
    }
}

/// `status`, asked back to back on a task of its own until ``finish()`` (or the daemon's end):
/// the most lists it saw warmed at once and the most requests queued, so a test can say "never".
final class StatusWatch: Sendable {
    private struct Seen {
        var active = 0
        var queued = 0
        var samples = 0
        var stopped = false
    }

    private let seen: Locked<Seen>
    private let task: Task<Void, Never>

    init(_ daemon: DaemonProcess) {
        let seen = Locked(Seen())
        self.seen = seen
        task = Task {
            while !seen.withLock(\.stopped), daemon.isRunning {
                guard let reply = try? await daemon.call(#"{"cmd":"status"}"#), let status = reply["result"] as? [String: Any] else {
                    continue
                }
                let active = status["lists_active"] as? Int ?? 0, queued = status["queued"] as? Int ?? 0
                seen.withLock { seen in
                    seen.active = max(seen.active, active)
                    seen.queued = max(seen.queued, queued)
                    seen.samples += 1
                }
            }
        }
    }

    /// Stops watching; what it saw.
    func finish() async -> (mostActive: Int, mostQueued: Int, samples: Int) {
        seen.withLock { $0.stopped = true }
        await task.value
        return seen.withLock { ($0.active, $0.queued, $0.samples) }
    }
}
