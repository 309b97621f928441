import Foundation
import ImgdTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Calendar windows in the real `imgd`: caps changed on time by windows a few seconds ahead (no
/// fake clock), lists held to their window, a close that pauses a list without losing a
/// transfer, reloads, and bad window tables.
@Suite("Calendar windows (the real imgd)", .offThePool)
struct CalendarWindowDaemonTests {
    /// `HH:MM:SS` of `epoch` in UTC (the daemons here run with TZ=UTC) or `offset` seconds east.
    static func clock(_ epoch: Int, offset: Int = 0) -> String {
        let second = ((epoch + offset) % 86_400 + 86_400) % 86_400
        func two(_ value: Int) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return "\(two(second / 3600)):\(two(second / 60 % 60)):\(two(second % 60))"
    }

    static var now: Int { Int(time(nil)) }

    static func window(_ field: [String: Any]?) -> [String: Any] { field ?? [:] }

    @Test("a window a few seconds ahead raises max-parallel when it opens and lowers it when it closes; transfers running at the close finish, none fails")
    func capsFollowTheWindow() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try await withRunningServer { server in
            // Local time is UTC+3 here ("UTC-3" in POSIX TZ): the window's hours are local.
            let offset = 3 * 3600
            // Far enough ahead that a slow start (a loaded CI machine) still sees it closed first.
            let opens = Self.now + 8, closes = opens + 5
            try scratch.write(
                "imgd.toml",
                """
                max-parallel = 1
                max-per-host = 8
                [window."burst"]
                hours = "\(Self.clock(opens, offset: offset))-\(Self.clock(closes, offset: offset))"
                max-parallel = 3
                """)
            let daemon = try await DaemonProcess.start(
                in: scratch.path, arguments: ["--config", scratch.path + "/imgd.toml"], environment: ["TZ": "UTC-3"])
            defer { daemon.killIfRunning() }
            let events = try await daemon.subscribe(["window"])
            defer { events.close() }
            let before = Self.window(try await daemon.result(#"{"cmd":"status"}"#)["window"] as? [String: Any])
            #expect(before["name"] is NSNull && before["max_parallel"] as? Int == 1, "\(before)")
            let next = before["next"] as? [String: Any]
            #expect(next?["name"] as? String == "burst" && next?["opens_at"] as? Int == opens * 1000 && next?["closes_at"] as? Int == closes * 1000)
            // Three URLs held on gate a, three on gate b, in that order.
            let urls = (1...3).map { server.url("/img/a\($0).png?gate=a") } + (1...3).map { server.url("/img/b\($0).png?gate=b") }
            try daemon.drop("burst.txt", urls.joined(separator: "\n") + "\n")
            #expect(await server.waitForInFlight(atLeast: 1, timeout: .seconds(10)))
            #expect(server.maxInFlight == 1, "more than max-parallel before the window opened")
            // The window opens on time: the event, then two more transfers.
            let opened = await events.first("window", timeout: .seconds(20)) { $0["name"] as? String == "burst" }
            let openedAt = Date().timeIntervalSince1970
            #expect(opened != nil)
            #expect(openedAt - Double(opens) < 2, "the window's event came \(openedAt - Double(opens)) s after its opening")
            #expect(await server.waitForInFlight(atLeast: 3, timeout: .seconds(10)), "max-parallel 3 was not applied: \(server.inFlight) in flight")
            let during = Self.window(try await daemon.result(#"{"cmd":"status"}"#)["window"] as? [String: Any])
            #expect(during["name"] as? String == "burst" && during["max_parallel"] as? Int == 3, "\(during)")
            // It closes on time; the three running transfers are not cut.
            let closed = await events.first("window", timeout: .seconds(20)) { $0["name"] is NSNull }
            #expect(closed != nil)
            #expect(Date().timeIntervalSince1970 - Double(closes) < 2)
            #expect(server.inFlight == 3)
            server.openGate("a")
            // Back to one at a time: b1 starts, and no second one beside it.
            #expect(await eventually(timeout: .seconds(10)) { server.requestCount(prefix: "/img/b") >= 1 })
            #expect(await !eventually(timeout: .seconds(1)) { server.inFlight > 1 }, "max-parallel 1 was not restored")
            server.openGate("b")
            let done = await daemon.finishedList("burst.txt")
            #expect(done?["state"] as? String == "done" && done?["cached"] as? Int == 6, "\(String(describing: done))")
            #expect(server.totalRequests == 6, "a transfer was cut and made again: \(server.requestLog)")
            #expect(await daemon.stop() == 0)
        }
    }

    @Test("a list held to a closed window waits without a request while others run; a reload that opens the window starts it; one that closes it pauses it (running transfers finish, queued ones wait); opened again it finishes")
    func heldLists() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try await withRunningServer { server in
            let config = scratch.path + "/imgd.toml"
            // A window that is open now, or one that is not (twelve hours away), by a reload.
            func write(open: Bool) throws {
                let start = open ? Self.now - 60 : Self.now + 12 * 3600
                try scratch.write(
                    "imgd.toml",
                    """
                    max-parallel = 2
                    max-per-host = 8
                    [window."night"]
                    hours = "\(Self.clock(start))-\(Self.clock(start + 3 * 3600))"
                    lists = ["nightly-*"]
                    """)
            }
            try write(open: false)
            let daemon = try await DaemonProcess.start(in: scratch.path, arguments: ["--config", config], environment: ["TZ": "UTC"])
            defer { daemon.killIfRunning() }
            let nightly = (1...4).map { server.url("/img/n\($0).png?gate=n") }
            try daemon.drop("nightly-1.txt", nightly.joined(separator: "\n") + "\n")
            try daemon.drop("day.txt", server.url("/img/d1.png") + "\n" + server.url("/img/d2.png") + "\n")
            let day = await daemon.finishedList("day.txt")
            #expect(day?["state"] as? String == "done")
            let held = try await daemon.list("nightly-1.txt")
            #expect(held?["state"] as? String == "held" && held?["window"] as? [String] == ["night"], "\(String(describing: held))")
            #expect(server.requestCount(prefix: "/img/n") == 0)
            // Opened by a reload: two start (max-parallel 2), two wait.
            try write(open: true)
            _ = try await daemon.result(#"{"cmd":"reload"}"#)
            #expect(await server.waitForInFlight(atLeast: 2, timeout: .seconds(10)))
            #expect(try await daemon.list("nightly-1.txt")?["state"] as? String == "active")
            // Closed by a reload: paused. The two running finish; the two queued are not asked for.
            try write(open: false)
            _ = try await daemon.result(#"{"cmd":"reload"}"#)
            let paused = try await daemon.list("nightly-1.txt")
            #expect(paused?["state"] as? String == "held", "\(String(describing: paused))")
            server.openGate("n")
            #expect(await eventually(timeout: .seconds(10)) { (try? await daemon.list("nightly-1.txt"))?["cached"] as? Int == 2 })
            #expect(await !eventually(timeout: .seconds(1)) { server.requestCount(prefix: "/img/n") > 2 }, "\(server.requestLog)")
            #expect(try await daemon.list("nightly-1.txt")?["state"] as? String == "held")
            // A list not held to the window still runs meanwhile.
            try daemon.drop("other.txt", server.url("/img/o1.png") + "\n")
            #expect(await daemon.finishedList("other.txt")?["state"] as? String == "done")
            // Opened again: it resumes where it stopped and finishes, each URL asked once.
            try write(open: true)
            _ = try await daemon.result(#"{"cmd":"reload"}"#)
            let done = await daemon.finishedList("nightly-1.txt")
            #expect(done?["state"] as? String == "done" && done?["cached"] as? Int == 4, "\(String(describing: done))")
            #expect(server.requestCount(prefix: "/img/n") == 4, "\(server.requestLog)")
            #expect(await daemon.stop() == 0)
        }
    }

    @Test("a URL queued by a list paused outside its window is still fetched for another list that needs it now")
    func sharedURLIsNotHeld() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try await withRunningServer { server in
            func write(open: Bool) throws {
                let start = open ? Self.now - 60 : Self.now + 12 * 3600
                try scratch.write(
                    "imgd.toml",
                    "max-parallel = 1\n[window.\"night\"]\nhours = \"\(Self.clock(start))-\(Self.clock(start + 3 * 3600))\"\nlists = [\"nightly-*\"]\n")
            }
            try write(open: true)
            let daemon = try await DaemonProcess.start(
                in: scratch.path, arguments: ["--config", scratch.path + "/imgd.toml"], environment: ["TZ": "UTC"])
            defer { daemon.killIfRunning() }
            // One slot: the first URL holds it on a gate, the shared one waits in the engine's queue.
            let shared = server.url("/img/shared.png")
            try daemon.drop("nightly-1.txt", server.url("/img/first.png?gate=f") + "\n" + shared + "\n")
            #expect(await server.waitForInFlight(atLeast: 1, timeout: .seconds(10)))
            try write(open: false)
            _ = try await daemon.result(#"{"cmd":"reload"}"#)
            #expect(try await daemon.list("nightly-1.txt")?["state"] as? String == "held")
            server.openGate("f")
            try daemon.drop("day.txt", shared + "\n")
            let day = await daemon.finishedList("day.txt", timeout: .seconds(20))
            #expect(day?["state"] as? String == "done", "the shared URL waited for the night: \(String(describing: day))")
            #expect(server.requestCount("/img/shared.png") == 1)
            #expect(await daemon.stop() == 0)
        }
    }

    @Test("a held list survives a restart held, and a cancel of a held list finishes it as cancelled")
    func heldAcrossRestartAndCancel() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try await withRunningServer { server in
            let start = Self.now + 12 * 3600
            try scratch.write(
                "imgd.toml", "[window.\"night\"]\nhours = \"\(Self.clock(start))-\(Self.clock(start + 3600))\"\nlists = [\"nightly-*\"]\n")
            let arguments = ["--config", scratch.path + "/imgd.toml"]
            var daemon = try await DaemonProcess.start(in: scratch.path, arguments: arguments, environment: ["TZ": "UTC"])
            defer { daemon.killIfRunning() }
            try daemon.drop("nightly-a.txt", server.url("/img/x1.png") + "\n")
            #expect(await eventually(timeout: .seconds(10)) { (try? await daemon.list("nightly-a.txt"))?["state"] as? String == "held" })
            #expect(await daemon.stop() == 0)
            daemon = try await DaemonProcess.start(in: scratch.path, arguments: arguments, environment: ["TZ": "UTC"])
            #expect(await eventually(timeout: .seconds(10)) { (try? await daemon.list("nightly-a.txt"))?["state"] as? String == "held" })
            let cancelled = try await daemon.result(#"{"cmd":"cancel","list":"nightly-a.txt"}"#)
            #expect(cancelled["cancelled"] as? Int == 1, "\(cancelled)")
            #expect(await daemon.finishedList("nightly-a.txt")?["state"] as? String == "cancelled")
            #expect(server.totalRequests == 0)
            #expect(await daemon.stop() == 0)
        }
    }

    @Test("bad window tables are refused at start naming the file, line and fault; a bad one on reload keeps the running windows and loses nothing")
    func badTables() async throws {
        try await expectConfigurationRefused("[window.\"w\"]\nhours = \"25:00-26:00\"\n", line: 2, mentions: "is not a span such as")
        try await expectConfigurationRefused("[window.\"w\"]\ndays = \"weekdays\"\nhours = \"01:00-02:00\"\n", line: 2, mentions: "is not a set of days")
        try await expectConfigurationRefused("[window.\"w\"]\nhours = \"01:00-02:00\"\nmax-paralel = 3\n", line: 3, mentions: "unknown setting")
        try await expectConfigurationRefused("[window.\"w\"]\nmax-parallel = 3\n", line: 1, mentions: "hours is missing")
        try await expectConfigurationRefused("[window.\"w\"]\nhours = \"01:00-02:00\"\nmax-parallel = 0\n", line: 3, mentions: "from 1 to 1024")
        try await expectConfigurationRefused("[window.\"w\"]\nhours = \"01:00-02:00\"\nmax-rate = \"10\"\n", line: 3, mentions: "0 (no cap) or at least")
        try await expectConfigurationRefused("[window.\"w\"]\nhours = \"01:00-02:00\"\nlists = \"nightly-*\"\n", line: 3, mentions: "expected an array")
        try await expectConfigurationRefused(
            "[window.\"a\"]\nhours = \"22:00-06:00\"\n[window.\"b\"]\ndays = \"sat\"\nhours = \"05:00-07:00\"\n", line: 1,
            mentions: "windows \"a\" and \"b\" are both open on sat")
        // On reload: the running windows stay, the cache and the lists are untouched.
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try await withRunningServer { server in
            let start = Self.now - 60
            let good = "max-parallel = 1\n[window.\"open\"]\nhours = \"\(Self.clock(start))-\(Self.clock(start + 3600))\"\nmax-parallel = 4\n"
            try scratch.write("imgd.toml", good)
            let daemon = try await DaemonProcess.start(
                in: scratch.path, arguments: ["--config", scratch.path + "/imgd.toml"], environment: ["TZ": "UTC"])
            defer { daemon.killIfRunning() }
            _ = try await daemon.result(#"{"cmd":"get","url":"\#(server.url("/img/kept.png"))"}"#)
            try scratch.write("imgd.toml", good + "[window.\"broken\"]\nhours = \"10:00\"\n")
            let reload = try await daemon.call(#"{"cmd":"reload"}"#)
            #expect((reload["error"] as? [String: Any])?["message"] as? String ?? "" != "", "\(reload)")
            let status = try await daemon.result(#"{"cmd":"status"}"#)
            let window = Self.window(status["window"] as? [String: Any])
            #expect(window["name"] as? String == "open" && window["max_parallel"] as? Int == 4, "\(window)")
            let hit = try await daemon.result(#"{"cmd":"get","url":"\#(server.url("/img/kept.png"))","fetch":false}"#)
            #expect(hit["source"] as? String != nil, "\(hit)")
            #expect(server.requestCount("/img/kept.png") == 1)
            #expect(await daemon.stop() == 0)
        }
    }
}
