import Foundation
import ImgdTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Deadline lists in the real `imgd` (issue 31 §2): `# ready-by:`, a JSON list's object and
/// `add`'s `ready_by`; the estimate in `lists`; `at_risk` / `on_track`; a larger share for a list
/// at risk; the report's verdict; bad deadlines refused naming what is wrong, with nothing else
/// lost; a second member's added list.
@Suite("Deadline lists (the real imgd)", .offThePool)
struct DeadlineListTests {
    static var nowMilliseconds: Int { Int(Date().timeIntervalSince1970 * 1000) }

    /// `2026-12-07T05:30:00Z` for `milliseconds` since 1970 (the second).
    static func iso(_ milliseconds: Int) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime]
        return formatter.string(from: Date(timeIntervalSince1970: Double(milliseconds / 1000)))
    }

    /// `count` image URLs of `server` under `/img/PREFIX-N.png` with `query`.
    static func urls(_ server: TestHTTPServer, _ prefix: String, count: Int, query: String = "") -> [String] {
        (1...count).map { server.url("/img/\(prefix)-\($0).png" + (query.isEmpty ? "" : "?" + query)) }
    }

    @Test("a text list with a far deadline: lists shows ready_by and, once measured, an eta before it, not at risk; finished, deadline_met in lists, the report and list_done")
    func metDeadline() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try await withRunningServer { server in
            let daemon = try await DaemonProcess.start(in: scratch.path, arguments: ["--max-parallel", "2"])
            defer { daemon.killIfRunning() }
            let events = try await daemon.subscribe(["list_done", "at_risk", "on_track"])
            defer { events.close() }
            let readyBy = (Self.nowMilliseconds / 1000 + 3600) * 1000
            let urls = Self.urls(server, "met", count: 24, query: "delay_ms=250")
            try daemon.drop("met.txt", "# ready-by: \(Self.iso(readyBy))\n" + urls.joined(separator: "\n") + "\n")
            // After 3 s of warming, the estimate.
            var measured: [String: Any]?
            _ = await eventually(timeout: .seconds(20)) {
                guard let list = try await daemon.list("met.txt"), list["eta"] is Int else { return false }
                measured = list
                return true
            }
            let list = try #require(measured, "no eta in lists")
            #expect(list["ready_by"] as? Int == readyBy, "\(list)")
            #expect(list["at_risk"] as? Bool == false)
            let eta = list["eta"] as? Int ?? 0
            #expect(eta > Self.nowMilliseconds - 1000 && eta < readyBy, "eta \(eta)")
            let done = try #require(await daemon.finishedList("met.txt"))
            #expect(done["state"] as? String == "done" && done["deadline_met"] as? Bool == true && done["eta"] == nil, "\(done)")
            let report = try #require(await daemon.report("met.txt", in: "done"))
            #expect(report["ready_by"] as? String == Self.iso(readyBy).replacingOccurrences(of: "Z", with: ".000Z"), "\(report)")
            #expect(report["deadline_met"] as? Bool == true)
            let finished = await events.listDone("met.txt")
            #expect(finished?.data["deadline_met"] as? Bool == true && finished?.data["ready_by"] as? Int == readyBy)
            #expect(!events.events.contains { $0.name == "at_risk" }, "a list that will make it was called at risk")
            #expect(await daemon.stop() == 0)
        }
    }

    @Test("a list that cannot make its deadline: at_risk once, at_risk in lists, then more than twice the fetches of a list without a deadline (which still gets some); missed in its report")
    func atRiskGetsALargerShare() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try await withRunningServer { server in
            let daemon = try await DaemonProcess.start(in: scratch.path, arguments: ["--max-parallel", "4", "--max-per-host", "4"])
            defer { daemon.killIfRunning() }
            let events = try await daemon.subscribe(["at_risk", "on_track", "list_done"])
            defer { events.close() }
            // The calm list takes every slot first.
            try daemon.drop("calm.txt", Self.urls(server, "calm", count: 300, query: "delay_ms=250").joined(separator: "\n") + "\n")
            #expect(await server.waitForInFlight(atLeast: 4, timeout: .seconds(10)))
            // The urgent one: 300 URLs at 250 ms each need 19 s on all four slots, and it has 15.
            let readyBy = Self.nowMilliseconds + 15_000
            try daemon.drop(
                "urgent.txt", "# ready-by: \(Self.iso(readyBy + 999))\n" + Self.urls(server, "urgent", count: 300, query: "delay_ms=250").joined(separator: "\n") + "\n")
            let atRisk = try #require(await events.first("at_risk", timeout: .seconds(15)) { $0["name"] as? String == "urgent.txt" })
            #expect(atRisk.data["remaining"] as? Int ?? 0 > 0 && atRisk.data["ready_by"] as? Int == (readyBy + 999) / 1000 * 1000, "\(atRisk.data)")
            #expect((atRisk.data["eta"] as? Int ?? .max) > (readyBy + 999) / 1000 * 1000, "\(atRisk.data)")
            let shown = try await daemon.list("urgent.txt")
            #expect(shown?["at_risk"] as? Bool == true, "\(String(describing: shown))")
            #expect(try await daemon.list("calm.txt")?["ready_by"] == nil)
            // From here, while its deadline is to come: the urgent list has the larger share.
            let urgentBefore = server.requestCount(prefix: "/img/urgent-"), calmBefore = server.requestCount(prefix: "/img/calm-")
            #expect(await eventually(timeout: .seconds(10)) { server.requestCount(prefix: "/img/urgent-") >= urgentBefore + 30 })
            let urgentGained = server.requestCount(prefix: "/img/urgent-") - urgentBefore
            let calmGained = server.requestCount(prefix: "/img/calm-") - calmBefore
            #expect(Self.nowMilliseconds < readyBy, "the measure ran past the deadline: too slow a machine to judge the share")
            #expect(urgentGained > 2 * calmGained, "urgent \(urgentGained) vs calm \(calmGained): the list at risk did not get the larger share")
            #expect(calmGained >= 1, "the list without a deadline was starved")
            // The calm list goes; the urgent one finishes late.
            _ = try await daemon.result(#"{"cmd":"cancel","list":"calm.txt"}"#)
            let done = try #require(await daemon.finishedList("urgent.txt", timeout: .seconds(60)))
            #expect(done["state"] as? String == "done" && done["deadline_met"] as? Bool == false, "\(done)")
            let report = try #require(await daemon.report("urgent.txt", in: "done"))
            #expect(report["deadline_met"] as? Bool == false && report["ready_by"] is String, "\(report)")
            #expect(events.events.filter { $0.name == "at_risk" && $0.data["name"] as? String == "urgent.txt" }.count == 1)
            #expect(await daemon.stop() == 0)
        }
    }

    @Test("a stalled list (its origin holds every request) is at risk with no eta; once the origin answers it is on_track before its deadline, and meets it")
    func stalledThenOnTrack() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try await withRunningServer { server in
            let daemon = try await DaemonProcess.start(in: scratch.path, arguments: ["--max-parallel", "2", "--max-per-host", "2"])
            defer { daemon.killIfRunning() }
            let events = try await daemon.subscribe(["at_risk", "on_track"])
            defer { events.close() }
            let readyBy = (Self.nowMilliseconds / 1000 + 90) * 1000
            let urls = Self.urls(server, "gated", count: 400, query: "gate=g&delay_ms=20")
            try daemon.drop("gated.json", jsonLine(["urls": urls, "ready_by": Self.iso(readyBy)]))
            let stalled = try #require(await events.first("at_risk", timeout: .seconds(20)) { $0["name"] as? String == "gated.json" })
            #expect(stalled.data["eta"] is NSNull && stalled.data["rate"] as? Double == 0, "\(stalled.data)")
            let shown = try await daemon.list("gated.json")
            #expect(shown?["at_risk"] as? Bool == true && shown?["eta"] is NSNull && shown?["ready_by"] as? Int == readyBy, "\(String(describing: shown))")
            server.openGate("g")
            let recovered = try #require(await events.first("on_track", timeout: .seconds(30)) { $0["name"] as? String == "gated.json" })
            #expect((recovered.data["eta"] as? Int ?? .max) < readyBy, "\(recovered.data)")
            let done = try #require(await daemon.finishedList("gated.json", timeout: .seconds(60)))
            #expect(done["state"] as? String == "done" && done["deadline_met"] as? Bool == true, "\(done)")
            #expect(await daemon.stop() == 0)
        }
    }

    @Test("bad deadlines (a text header, a JSON object's ready_by, an unknown member) fail their list as bad_list naming what is wrong, fetch nothing of it; a list beside them is warmed and kept; a time of day is the next one")
    func badDeadlines() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try await withRunningServer { server in
            let daemon = try await DaemonProcess.start(in: scratch.path, environment: ["TZ": "UTC"])
            defer { daemon.killIfRunning() }
            try daemon.drop("fine.txt", Self.urls(server, "fine", count: 3).joined(separator: "\n") + "\n")
            try daemon.drop("bad.txt", "# ready-by: next tuesday\n" + server.url("/img/bad-1.png") + "\n")
            try daemon.drop("bad.json", jsonLine(["ready_by": "25:99", "urls": [server.url("/img/bad-2.png")]]))
            try daemon.drop("typo.json", jsonLine(["readyBy": "05:30", "urls": [server.url("/img/bad-3.png")]]))
            let cases = [
                ("bad.txt", "bad '# ready-by:' header: 'next tuesday' is not a deadline"),
                ("bad.json", "bad ready_by: '25:99' is not a deadline"),
                ("typo.json", "unknown member \"readyBy\" in the list's object"),
            ]
            for (name, message) in cases {
                let list = try #require(await daemon.finishedList(name), "\(name)")
                #expect(list["state"] as? String == "failed" && list["failed"] as? Int == 1 && list["ready_by"] == nil, "\(list)")
                let report = try #require(await daemon.report(name, in: "failed"))
                let failure = (report["failures"] as? [[String: Any]])?.first
                #expect(failure?["code"] as? String == "bad_list", "\(report)")
                #expect((failure?["message"] as? String)?.contains(message) == true, "\(name): \(String(describing: failure))")
            }
            #expect(server.requestCount(prefix: "/img/bad-") == 0)
            let fine = try #require(await daemon.finishedList("fine.txt"))
            #expect(fine["state"] as? String == "done" && fine["cached"] as? Int == 3)
            for url in Self.urls(server, "fine", count: 3) {
                let reply = try await daemon.call(jsonLine(["cmd": "get", "url": url, "fetch": false]))
                #expect(reply["ok"] as? Bool == true, "\(reply)")
            }
            // `HH:MM`: the next such time (UTC here) after the claim.
            let target = (Self.nowMilliseconds / 1000 + 7200) % 86_400 / 60 * 60
            let hhmm = String(format: "%02d:%02d", target / 3600, target / 60 % 60)
            try daemon.drop("daily.txt", "# ready-by: \(hhmm)\n" + server.url("/img/daily-1.png?gate=d") + "\n")
            var claimed: [String: Any]?
            _ = await eventually(timeout: .seconds(10)) {
                claimed = try await daemon.list("daily.txt")
                return claimed?["ready_by"] is Int
            }
            let claimedAt = try #require(claimed?["claimed_at"] as? Int)
            var expected = (claimedAt / 86_400_000) * 86_400_000 + target * 1000
            if expected <= claimedAt { expected += 86_400_000 }
            #expect(claimed?["ready_by"] as? Int == expected, "\(String(describing: claimed)) for \(hhmm)")
            server.openGate("d")
            #expect(await daemon.stop() == 0)
        }
    }

    @Test(
        "add with ready_by makes a list: named, owned by the caller, kept across a restart, reported; bad ready_by or name is invalid_argument and adds nothing; a second member's added list is theirs to cancel, not root's list",
        .enabled(if: OtherUser.available, "needs root and util-linux's setpriv to act as a second uid"))
    func addWithReadyBy() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try await withRunningServer { server in
            var daemon = try await DaemonProcess.startShared(in: scratch)
            defer { daemon.killIfRunning() }
            let readyBy = (Self.nowMilliseconds / 1000 + 3600) * 1000
            let urls = [server.url("/img/added-1.png"), server.url("/img/added-2.png?gate=a"), "ftp://nope.example/x.png"]
            let reply = try await daemon.result(jsonLine(["cmd": "add", "urls": urls, "ready_by": Self.iso(readyBy), "name": "hot-set"]))
            #expect(reply["list"] as? String == "hot-set.json" && reply["ready_by"] as? Int == readyBy, "\(reply)")
            #expect(reply["accepted"] as? Int == 2 && (reply["rejected"] as? [[String: Any]])?.first?["code"] as? String == "bad_url", "\(reply)")
            #expect(await eventually(timeout: .seconds(10)) { server.requestCount(prefix: "/img/added-2") == 1 })
            let listed = try await daemon.list("hot-set.json")
            #expect(listed?["ready_by"] as? Int == readyBy && listed?["total"] as? Int == 3, "\(String(describing: listed))")

            // Refused, naming the argument; nothing is added.
            let before = try await daemon.lists().count
            for (line, field) in [
                (jsonLine(["cmd": "add", "urls": [server.url("/img/x.png")], "ready_by": "soonish"]), "ready_by"),
                (jsonLine(["cmd": "add", "urls": [server.url("/img/x.png")], "ready_by": "05:30", "name": "../escape"]), "name"),
                (jsonLine(["cmd": "add", "urls": [server.url("/img/x.png")], "ready_by": "05:30", "name": ".hidden"]), "name"),
                (jsonLine(["cmd": "add", "urls": [server.url("/img/x.png")], "name": "no-deadline"]), "name"),
                (jsonLine(["cmd": "add", "urls": [server.url("/img/x.png")], "ready_by": "05:30", "name": "nightly.report"]), "kept for reports"),
                (jsonLine(["cmd": "add", "urls": [server.url("/img/x.png")], "ready_by": "05:30", "name": "  "]), "only spaces"),
                // 123 bytes and `.json` is 128, the most; 124 and `.json` is one over.
                (jsonLine(["cmd": "add", "urls": [server.url("/img/x.png")], "ready_by": "05:30", "name": String(repeating: "n", count: 124)]), "longer than 128 bytes"),
                (jsonLine(["cmd": "add", "urls": [server.url("/img/x.png")], "ready_by": "2020-01-01T00:00:00Z"]), "which has passed"),
            ] {
                let refused = try await daemon.call(line)
                let error = refused["error"] as? [String: Any]
                #expect(error?["code"] as? String == "invalid_argument" && (error?["message"] as? String)?.contains(field) == true, "\(line): \(refused)")
            }
            #expect(try await daemon.lists().count == before)
            #expect(server.requestCount(prefix: "/img/x.png") == 0)
            // At the bound, taken.
            let longest = String(repeating: "n", count: 123)
            let taken = try await daemon.result(jsonLine(["cmd": "add", "urls": [server.url("/img/longest.png")], "ready_by": "05:30", "name": longest]))
            #expect(taken["list"] as? String == longest + ".json", "\(taken)")

            // Kept across a restart (its URL held at the origin meanwhile).
            #expect(await daemon.stop() == 0)
            daemon = try await DaemonProcess.startShared(in: scratch)
            let resumed = try await daemon.list("hot-set.json")
            #expect(resumed?["ready_by"] as? Int == readyBy && resumed?["state"] as? String == "active", "\(String(describing: resumed))")
            server.openGate("a")
            let done = try #require(await daemon.finishedList("hot-set.json"))
            // Cached, or found cached after the restart when its outcome had not been written by the stop.
            #expect(done["state"] as? String == "failed" && (done["cached"] as? Int ?? 0) + (done["already_cached"] as? Int ?? 0) == 2, "\(done)")
            #expect(done["failed"] as? Int == 1, "\(done)")
            #expect(done["deadline_met"] as? Bool == true, "every URL settled before the deadline (the failure is counted apart): \(done)")
            let report = try #require(await daemon.report("hot-set.json", in: "failed"))
            #expect(report["deadline_met"] as? Bool == true && (report["failures"] as? [[String: Any]])?.first?["code"] as? String == "bad_url")
            let file = try String(contentsOfFile: daemon.spool + "/failed/hot-set.json", encoding: .utf8)
            #expect(file.contains(Self.iso(readyBy)) && file.contains("added-2.png"), "\(file)")

            // A second member: their added list is theirs; root's is not theirs to cancel.
            let rootList = try await daemon.result(
                jsonLine(["cmd": "add", "urls": [server.url("/img/root-1.png?gate=r")], "ready_by": Self.iso(readyBy), "name": "roots"]))
            let member = OtherUser.plain
            let theirs = try await member.result(
                jsonLine(["cmd": "add", "urls": [server.url("/img/member-1.png?gate=m")], "ready_by": Self.iso(readyBy)]), socket: daemon.socket)
            let theirName = try #require(theirs["list"] as? String)
            #expect(theirName.hasPrefix("add-\(OtherUser.uid)-") && theirName.hasSuffix(".json"), "\(theirName)")
            let forbidden = try await member.call(jsonLine(["cmd": "cancel", "list": rootList["list"] as? String ?? "?"]), socket: daemon.socket)
            #expect((forbidden["error"] as? [String: Any])?["code"] as? String == "forbidden", "\(forbidden)")
            let cancelled = try await member.result(jsonLine(["cmd": "cancel", "list": theirName]), socket: daemon.socket)
            #expect(cancelled["cancelled"] as? Int == 1, "\(cancelled)")
            let theirsDone = try #require(await daemon.finishedList(theirName))
            #expect(theirsDone["state"] as? String == "cancelled" && theirsDone["deadline_met"] as? Bool == false, "\(theirsDone)")
            // imgctl: the deadline column and add's line.
            let table = try await BinaryRunner.imgctl(["lists", "--socket", daemon.socket], in: scratch.path)
            #expect(table.stdout.contains("DEADLINE") && table.stdout.contains("missed") && (table.stdout.contains("in 1h") || table.stdout.contains("in 59m")), "\(table.stdout)")
            let added = try await BinaryRunner.imgctl(
                ["add", "--socket", daemon.socket, "--ready-by", Self.iso(readyBy), "--name", "cli", server.url("/img/cli-1.png")], in: scratch.path)
            #expect(added.status == 0 && added.stdout.contains("added list cli.json of 1 URL, deadline in "), "\(added.stdout) \(added.stderr)")
            server.openGate("r")
            #expect(await daemon.stop() == 0)
        }
    }
}

extension DeadlineListTests {
    @Test("a free turn goes to the waiting list whose deadline comes first, not the one claimed first")
    func deadlineFirstTurns() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try await withRunningServer { server in
            let daemon = try await DaemonProcess.start(in: scratch.path, arguments: ["--max-active-lists", "1"])
            defer { daemon.killIfRunning() }
            try daemon.drop("first.txt", server.url("/img/first-1.png?gate=f") + "\n")
            #expect(await server.waitForInFlight(atLeast: 1, timeout: .seconds(10)))
            try daemon.drop("plain.txt", server.url("/img/plain-1.png?gate=p") + "\n")
            #expect(await eventually(timeout: .seconds(10)) { try await daemon.list("plain.txt")?["state"] as? String == "waiting" })
            let readyBy = (Self.nowMilliseconds / 1000 + 3600) * 1000
            try daemon.drop("urgent.txt", "# ready-by: \(Self.iso(readyBy))\n" + server.url("/img/urgent-1.png?gate=u") + "\n")
            #expect(await eventually(timeout: .seconds(10)) { try await daemon.list("urgent.txt")?["state"] as? String == "waiting" })
            server.openGate("f")
            #expect(await eventually(timeout: .seconds(10)) { try await daemon.list("urgent.txt")?["state"] as? String == "active" })
            #expect(try await daemon.list("plain.txt")?["state"] as? String == "waiting")
            server.openGate("u")
            server.openGate("p")
            #expect(await daemon.finishedList("plain.txt")?["state"] as? String == "done")
            #expect(await daemon.stop() == 0)
        }
    }

    @Test(
        "a member's adds with ready_by are bounded by its share of max-queued over its unfinished lists (queue_full, nothing added); root's are not",
        .enabled(if: OtherUser.available, "needs root and util-linux's setpriv to act as a second uid"))
    func addedListsKeepTheMembersShare() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try await withRunningServer { server in
            // A share of 25% of 40: 10 URLs.
            let daemon = try await DaemonProcess.startShared(in: scratch, ["--max-queued", "40"])
            defer { daemon.killIfRunning() }
            let member = OtherUser.plain
            let readyBy = Self.iso(Self.nowMilliseconds + 3_600_000)
            let eight = Self.urls(server, "share", count: 8, query: "gate=s")
            let first = try await member.result(jsonLine(["cmd": "add", "urls": eight, "ready_by": readyBy]), socket: daemon.socket)
            #expect(first["accepted"] as? Int == 8, "\(first)")
            let before = try await daemon.lists().count
            let more = Self.urls(server, "more", count: 5, query: "gate=s")
            let refused = try await member.call(jsonLine(["cmd": "add", "urls": more, "ready_by": readyBy]), socket: daemon.socket)
            let error = refused["error"] as? [String: Any]
            #expect(error?["code"] as? String == "queue_full", "\(refused)")
            #expect((error?["message"] as? String)?.contains("uid \(OtherUser.uid) has 8 URLs pending in its unfinished lists") == true, "\(refused)")
            #expect(try await daemon.lists().count == before)
            #expect(server.requestCount(prefix: "/img/more-") == 0)
            // Sent at once on several connections, the adds are judged one after another: at most
            // the share is taken.
            let burst = try await withThrowingTaskGroup(of: Int.self) { group in
                for index in 1...4 {
                    group.addTask {
                        let reply = try await member.call(
                            jsonLine(["cmd": "add", "urls": Self.urls(server, "burst\(index)", count: 2, query: "gate=s"), "ready_by": readyBy]),
                            socket: daemon.socket)
                        return (reply["result"] as? [String: Any])?["accepted"] as? Int ?? 0
                    }
                }
                return try await group.reduce(0, +)
            }
            #expect(burst == 2, "the member's concurrent adds took \(burst) URLs past its 8 of 10")
            // Root is privileged: no share.
            let roots = try await daemon.result(jsonLine(["cmd": "add", "urls": Self.urls(server, "root", count: 30, query: "gate=s"), "ready_by": readyBy]))
            #expect(roots["accepted"] as? Int == 30, "\(roots)")
            server.openGate("s")
            #expect(await daemon.stop() == 0)
        }
    }
}

extension DeadlineListTests {
    @Test("of one owner's lists at risk only the one whose deadline comes first has the larger share (lists' boosted); it passes to the next when that one finishes")
    func oneBoostPerOwner() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try await withRunningServer { server in
            let daemon = try await DaemonProcess.start(in: scratch.path, arguments: ["--max-parallel", "2", "--max-per-host", "2"])
            defer { daemon.killIfRunning() }
            let events = try await daemon.subscribe(["at_risk"])
            defer { events.close() }
            // Both stall (their origin holds every request) with 20 s left: at risk in 3 s.
            let soon = Self.nowMilliseconds + 20_000, later = soon + 1000
            try daemon.drop("first.txt", "# ready-by: \(Self.iso(soon + 999))\n" + Self.urls(server, "first", count: 4, query: "gate=a").joined(separator: "\n") + "\n")
            try daemon.drop("second.txt", "# ready-by: \(Self.iso(later + 999))\n" + Self.urls(server, "second", count: 4, query: "gate=b").joined(separator: "\n") + "\n")
            for name in ["first.txt", "second.txt"] {
                #expect(await events.first("at_risk", timeout: .seconds(15)) { $0["name"] as? String == name } != nil, "\(name)")
            }
            var shown: [String: Bool] = [:]
            #expect(await eventually(timeout: .seconds(5)) {
                let lists = try await daemon.lists()
                shown = Dictionary(uniqueKeysWithValues: lists.compactMap { list in
                    (list["name"] as? String).map { ($0, list["boosted"] as? Bool ?? false) }
                })
                return shown["first.txt"] == true
            })
            #expect(shown["first.txt"] == true && shown["second.txt"] == false, "\(shown)")
            // The first one done, the second takes the larger share.
            server.openGate("a")
            #expect(await daemon.finishedList("first.txt")?["state"] as? String == "done")
            #expect(await eventually(timeout: .seconds(5)) { try await daemon.list("second.txt")?["boosted"] as? Bool == true })
            server.openGate("b")
            #expect(await daemon.finishedList("second.txt")?["state"] as? String == "done")
            #expect(await daemon.stop() == 0)
        }
    }
}
