import Foundation
import ImgdCore
import ImgdTestSupport
import Testing

/// Mirrors (issue 31 §5): an object item's `mirrors`, a host table's `mirrors`, and `get`'s,
/// against the real imgd and test servers acting as the primary and the mirror hosts.
@Suite("imgd: mirrors (the real binary)", .timeLimit(.minutes(5)), .offThePool)
struct DaemonMirrorTests {
    /// A JSON string literal of `text`.
    private static func quoted(_ text: String) -> String {
        String(decoding: try! JSONSerialization.data(withJSONObject: [text], options: [.withoutEscapingSlashes]), as: UTF8.self)
            .dropFirst().dropLast().description
    }

    @Test("an item's mirrors: a primary's 503 or 404 is cured by the next URL (report and fetched event say which), a 403 tries no mirror, a bad mirrors field is a clear bad line and loses nothing else, a mirror equal to the primary is asked once, and the budget counts every URL")
    func itemMirrors() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let primary = try await TestHTTPServer.start()
        let mirror = try await TestHTTPServer.start()
        defer { Task { try? await primary.shutdown(); try? await mirror.shutdown() } }
        let daemon = try await DaemonProcess.start(in: scratch.path, arguments: ["--attempts", "4"])
        defer { daemon.killIfRunning() }
        let events = try await daemon.subscribe(["fetched", "failed"])
        defer { events.close() }

        let p503 = primary.url("/status/503?item=1"), m503 = mirror.url("/img/cured-503.png")
        let p404 = primary.url("/nothing/here.png"), m404 = mirror.url("/img/cured-404.png")
        let p403 = primary.url("/status/403?item=3"), m403 = mirror.url("/img/never.png")
        let plain = primary.url("/img/plain.png")
        let pAll = primary.url("/status/503?item=all"), mAll = mirror.url("/status/502?item=all")
        let list = """
            [
              {"url": \(Self.quoted(p503)), "mirrors": [\(Self.quoted(m503))]},
              {"url": \(Self.quoted(p404)), "mirrors": [\(Self.quoted(m404))]},
              {"url": \(Self.quoted(p403)), "mirrors": [\(Self.quoted(m403))]},
              {"url": \(Self.quoted(primary.url("/img/bad1.png"))), "mirrors": ["ftp://files.example/x.png"]},
              {"url": \(Self.quoted(primary.url("/img/bad2.png"))), "mirrors": "https://b.example/x.png"},
              {"url": \(Self.quoted(primary.url("/img/bad3.png"))), "mirrors": [\(Self.quoted(m503)), 7]},
              \(Self.quoted(plain)),
              {"url": \(Self.quoted(pAll)), "mirrors": [\(Self.quoted(pAll)), \(Self.quoted(mAll)), \(Self.quoted(mAll))]}
            ]
            """
        try daemon.drop("mirrors.json", list)
        let finished = try #require(await daemon.finishedList("mirrors.json", timeout: .seconds(60)), "log:\n\(daemon.log)")
        #expect(finished["cached"] as? Int == 3, "\(finished)")
        #expect(finished["failed"] as? Int == 5, "\(finished)")
        let report = try #require(await daemon.report("mirrors.json", in: "failed"), "log:\n\(daemon.log)")

        // Served by the mirror: the report and the event say which URL served it.
        let served = try #require(report["served_by_mirror"] as? [[String: Any]], "\(report)")
        let servedBy = Dictionary(uniqueKeysWithValues: served.map { ($0["url"] as? String ?? "", $0["served_by"] as? String ?? "") })
        #expect(servedBy == [p503: m503, p404: m404], "\(served)")
        let fetched = await events.first("fetched") { $0["url"] as? String == p503 }
        #expect(fetched?.data["served_by"] as? String == m503, "\(events.events.map(\.line))")
        let fetchedPlain = await events.first("fetched") { $0["url"] as? String == plain }
        #expect(fetchedPlain != nil && fetchedPlain?.data["served_by"] == nil, "served_by only when a mirror served it")
        // The primary was asked once; the mirror at once after it (no retry of the primary first).
        #expect(primary.requestCount("/status/503?item=1") == 1)
        #expect(mirror.requestCount("/img/cured-503.png") == 1)
        #expect(primary.requestCount("/nothing/here.png") == 1)
        // Stored under the primary's key: a get of the primary finds it without fetching.
        let hit = try await daemon.result(#"{"cmd":"get","url":"\#(p503)","fetch":false}"#)
        #expect(hit["path"] is String, "\(hit)")

        let failures = try #require(report["failures"] as? [[String: Any]], "\(report)")
        func failure(_ url: String) -> [String: Any]? { failures.first { $0["url"] as? String == url } }
        // 403: no mirror is tried.
        #expect(failure(p403)?["code"] as? String == "http_403", "\(failures)")
        #expect(mirror.requestCount("/img/never.png") == 0)
        #expect(primary.requestCount("/status/403?item=3") == 1)
        // Bad mirrors: a bad line naming the mirror, nothing fetched for it; the rest is kept.
        #expect(failure(primary.url("/img/bad1.png"))?["code"] as? String == "bad_url", "\(failures)")
        #expect((failure(primary.url("/img/bad1.png"))?["message"] as? String)?.contains("mirror 1 'ftp://files.example/x.png'") == true, "\(failures)")
        #expect((failure(primary.url("/img/bad2.png"))?["message"] as? String)?.contains("bad mirrors: not an array") == true, "\(failures)")
        #expect((failure(primary.url("/img/bad3.png"))?["message"] as? String)?.contains("mirror 2 is not a string") == true, "\(failures)")
        #expect(primary.requestCount(prefix: "/img/bad") == 0)
        #expect(primary.requestCount("/img/plain.png") == 1)
        // All fail: the primary repeated as its own mirror and a mirror named twice are asked once
        // a round; every request counts against the 4 attempts: 2 rounds of 2.
        let all = try #require(failure(pAll), "\(failures)")
        #expect(all["code"] as? String == "http_503", "\(all)")
        #expect((all["message"] as? String)?.contains("mirrors: \(mAll): http_502") == true, "\(all)")
        #expect(primary.requestCount("/status/503?item=all") == 2)
        #expect(mirror.requestCount("/status/502?item=all") == 2)
        #expect(await daemon.stop() == 0)
    }

    @Test("a host table's mirrors: same path on another host and port, without the primary's headers; a mirror at a denied address is skipped (nothing connects to it) and the next one serves; a table naming its own host adds nothing; get takes mirrors too")
    func hostTableMirrors() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        // Listens on 127.0.0.2 only: 127.0.0.1 on its port refuses connections (the primary).
        let denied = try await TestHTTPServer.start(host: "127.0.0.2")
        let mirror = try await TestHTTPServer.start()
        defer { Task { try? await denied.shutdown(); try? await mirror.shutdown() } }
        try scratch.write("imgd.toml", """
            deny = ["127.0.0.2/32"]
            [host."127.0.0.1:\(denied.port)"]
            mirrors = ["127.0.0.2", "127.0.0.1:\(mirror.port)", "127.0.0.1:\(denied.port)"]
            headers = { X-Primary-Token = "only-for-the-primary" }
            headers-over-http = true
            """)
        let daemon = try await DaemonProcess.start(
            in: scratch.path, arguments: ["--config", scratch.path + "/imgd.toml", "--attempts", "3"])
        defer { daemon.killIfRunning() }
        let events = try await daemon.subscribe(["fetched"])
        defer { events.close() }
        let url = "http://127.0.0.1:\(denied.port)/img/host-table.png"
        let got = try await daemon.result(#"{"cmd":"get","url":"\#(url)"}"#)
        #expect(got["source"] as? String == "network", "\(got)")
        let fetched = await events.first("fetched") { $0["url"] as? String == url }
        #expect(fetched?.data["served_by"] as? String == mirror.url("/img/host-table.png"), "\(events.events.map(\.line))")
        #expect(denied.totalRequests == 0 && denied.connectionsAccepted == 0)
        #expect(mirror.requestCount("/img/host-table.png") == 1)
        // The primary's table's headers are its host's only: the mirror never sees them.
        let asked = try #require(mirror.requests.first { $0.target == "/img/host-table.png" })
        #expect(asked.values(of: "X-Primary-Token").isEmpty, "\(asked.headers)")

        // get's own mirrors, before the table's.
        let other = mirror.url("/img/get-mirror.png")
        let viaGet = try await daemon.result(
            #"{"cmd":"get","url":"http://127.0.0.1:\#(denied.port)/status/500","mirrors":["\#(other)"]}"#)
        #expect(viaGet["source"] as? String == "network", "\(viaGet)")
        #expect(mirror.requestCount("/img/get-mirror.png") == 1)
        #expect(mirror.requestCount("/status/500") == 0)
        // A Retry-After from the primary (localhost) holds its host, not the mirror on another
        // (127.0.0.1): it is asked at once, long before the 30 s hold ends.
        let started = ContinuousClock.now
        let held = try await daemon.result(
            #"{"cmd":"get","url":"http://localhost:\#(mirror.port)/flaky/ra.png?fail=100&status=503&retry_after=30","mirrors":["\#(mirror.url("/img/ra.png"))"]}"#)
        #expect(held["source"] as? String == "network", "\(held)")
        #expect(mirror.requestCount("/flaky/ra.png?fail=100&status=503&retry_after=30") == 1)
        #expect(mirror.requestCount("/img/ra.png") == 1)
        #expect(ContinuousClock.now - started < .seconds(20))

        // add's items take mirrors; a bad one rejects its item only.
        let added = try await daemon.result(
            #"{"cmd":"add","urls":[{"url":"http://127.0.0.1:\#(denied.port)/img/added.png","mirrors":["\#(mirror.url("/img/added.png"))"]},{"url":"\#(mirror.url("/img/bad-add.png"))","mirrors":[1]}]}"#)
        #expect(added["accepted"] as? Int == 1, "\(added)")
        let rejected = try #require((added["rejected"] as? [[String: Any]])?.first, "\(added)")
        #expect(rejected["code"] as? String == "bad_url" && (rejected["message"] as? String)?.contains("mirror 1 is not a string") == true, "\(rejected)")
        #expect(await eventually(timeout: .seconds(20)) { mirror.requestCount("/img/added.png") == 1 })
        #expect(mirror.requestCount("/img/bad-add.png") == 0)

        // imgctl get --mirror says the same.
        let byImgctl = try await BinaryRunner.imgctl(
            ["--socket", daemon.socket, "get", "--mirror", mirror.url("/img/imgctl-mirror.png"), "http://127.0.0.1:\(denied.port)/status/502"],
            in: scratch.path)
        #expect(byImgctl.status == 0, "\(byImgctl.stderr)")
        #expect(mirror.requestCount("/img/imgctl-mirror.png") == 1)
        let bad = try await daemon.call(#"{"cmd":"get","url":"\#(mirror.url("/img/x.png"))","mirrors":["gopher://x/y"]}"#)
        #expect(ControlReply.errorCode(bad) == "invalid_argument", "\(bad)")
        #expect("\(bad)".contains("mirror 1"), "\(bad)")
        #expect(await daemon.stop() == 0)
    }

    @Test("a bad host-table mirror is refused at start and at a reload, naming the table; the running tables stay")
    func badHostTableMirror() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try await expectConfigurationRefused(
            "[host.\"a.example\"]\nmirrors = [\"b.example/path\"]\n", line: 2, mentions: #"[host."a.example"] mirrors: 'b.example/path'"#)
        try await expectConfigurationRefused(
            "[host.\"a.example\"]\nmirrors = \"b.example\"\n", line: 2, mentions: #"[host."a.example"] mirrors: expected an array"#)

        try scratch.write("imgd.toml", "[host.\"a.example\"]\nmirrors = [\"b.example\", \"c.example:8443\"]\n")
        let daemon = try await DaemonProcess.start(in: scratch.path, arguments: ["--config", scratch.path + "/imgd.toml"])
        defer { daemon.killIfRunning() }
        try scratch.write("imgd.toml", "[host.\"a.example\"]\nmirrors = [\"c.example:99999\"]\n")
        kill(daemon.pid, SIGHUP)
        #expect(await eventually(timeout: .seconds(10)) { daemon.log.contains("c.example:99999") }, "\(daemon.log)")
        #expect(daemon.isRunning)
        #expect(!daemon.log.contains("reloaded: host tables"), "\(daemon.log)")
        #expect(await daemon.stop() == 0)
    }

    @Test("imgd prefetch takes an item's mirrors too: the primary's 503 is cured, the image stored under the primary's key")
    func prefetchMirrors() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try await withRunningServer { server in
            let primary = server.url("/status/503?prefetch=1")
            try scratch.write("list.json", #"[{"url": "\#(primary)", "mirrors": ["http://localhost:\#(server.port)/img/p.png"]}]"#)
            let run = try await BinaryRunner.imgd(["prefetch", "list.json", "--cache", "cache", "--attempts", "2"], in: scratch.path)
            #expect(run.status == 0, "stderr: \(run.stderr)")
            #expect(run.stdout.contains("0 failed"), "\(run.stdout)")
            let key = try ImageURL(primary).cacheKey
            #expect(FileManager.default.fileExists(atPath: scratch.path + "/cache/" + key.relativePath))
            #expect(server.requestCount("/status/503?prefetch=1") == 1 && server.requestCount("/img/p.png") == 1)
        }
    }

    @Test("two items of one key with different mirrors share one download: the second's mirror joins the job, its own URL is never asked")
    func coalescingByKey() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let primary = try await TestHTTPServer.start()
        let mirror = try await TestHTTPServer.start()
        defer { Task { try? await primary.shutdown(); try? await mirror.shutdown() } }
        let daemon = try await DaemonProcess.start(in: scratch.path, arguments: ["--attempts", "3"])
        defer { daemon.killIfRunning() }
        let first = primary.url("/status/503?which=first"), second = primary.url("/status/503?which=second")
        let list = """
            [
              {"url": \(Self.quoted(first)), "key": "shared", "mirrors": [\(Self.quoted(mirror.url("/status/503?which=m")))]},
              {"url": \(Self.quoted(second)), "key": "shared", "mirrors": [\(Self.quoted(mirror.url("/img/shared.png")))]}
            ]
            """
        try daemon.drop("shared.json", list)
        let finished = try #require(await daemon.finishedList("shared.json", timeout: .seconds(60)), "log:\n\(daemon.log)")
        #expect(finished["failed"] as? Int == 0, "\(finished)")
        #expect(primary.requestCount("/status/503?which=first") == 1)
        #expect(primary.requestCount("/status/503?which=second") == 0)
        #expect(mirror.requestCount("/status/503?which=m") == 1)
        #expect(mirror.requestCount("/img/shared.png") == 1)
        #expect(await daemon.stop() == 0)
    }
}
