import Foundation
import ImgdCore
import ImgdTestSupport
import Testing

/// Freshness and revalidation against the real imgd and the test server's `/fresh/` route,
/// which sends `Cache-Control`/`Expires`/`ETag` and answers conditional requests with `304`.
@Suite("imgd: freshness and revalidation (the real binary)", .timeLimit(.minutes(10)), .offThePool)
struct DaemonFreshnessTests {
    /// Conditional requests the server received for targets starting with `prefix`.
    private static func conditionals(_ server: TestHTTPServer, _ prefix: String) -> Int {
        server.requests.filter { request in
            request.target.hasPrefix(prefix)
                && !(request.values(of: "If-None-Match") + request.values(of: "If-Modified-Since")).isEmpty
        }.count
    }

    private static func inode(_ path: String) throws -> UInt64 {
        try #require(try FileManager.default.attributesOfItem(atPath: path)[.systemFileNumber] as? UInt64)
    }

    private static func get(_ daemon: DaemonProcess, _ url: String, _ extra: String = "") async throws -> [String: Any] {
        try await daemon.result(#"{"cmd":"get","url":"\#(url)"\#(extra)}"#)
    }

    /// A column of the entry for `url` in the cache index, read with sqlite3 (WAL: while imgd runs).
    private static func indexValue(_ scratch: ScratchFolder, _ column: String, of url: String) async throws -> Int? {
        let key = CacheKey(url: try ImageURL(url)).hex
        let output = try await ChildProcess.run(
            "/usr/bin/sqlite3", [scratch.path + "/imgd-data/cache/index.sqlite", "SELECT \(column) FROM entries WHERE key = x'\(key)'"])
        return Int(output.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
    }

    /// A daemon (with `arguments`) that leaves `gate` and `cond_status` out of 127.0.0.1's keys,
    /// as `key-ignore-query` leaves out a signature: URLs that differ only in how the origin
    /// delivers them name one entry, and each may send the validators another's response gave
    /// (URLs under one chosen key may not: they are not the same URL).
    private static func startWithDeliveryOutOfKeys(in scratch: ScratchFolder, _ arguments: [String]) async throws -> DaemonProcess {
        try scratch.write("delivery.toml", "[host.\"127.0.0.1\"]\nkey-ignore-query = [\"gate\", \"cond_status\"]\n")
        return try await DaemonProcess.start(in: scratch.path, arguments: ["--config", scratch.path + "/delivery.toml"] + arguments)
    }

    private static func stats(_ daemon: DaemonProcess) async throws -> [String: Any] {
        try await daemon.result(#"{"cmd":"stats"}"#)
    }

    /// Expects that `url`'s revalidation failed (`http_500`) was told once, however often the
    /// entry was used: one `failed` event for it, one conditional request to targets starting
    /// with `conditionalsTo`, one failure counted. Another URL's failure, asked for now, marks
    /// the end: events come in order, so a later `failed` event of the uses before would be
    /// there before its.
    private static func expectToldOnce(
        _ url: String, daemon: DaemonProcess, events: EventSubscription, server: TestHTTPServer, conditionalsTo prefix: String,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let missing = server.url("/status/404")
        _ = try await daemon.call(#"{"cmd":"get","url":"\#(missing)"}"#)
        #expect(await events.first("failed") { $0["url"] as? String == missing } != nil, sourceLocation: sourceLocation)
        let told = events.events.filter { $0.name == "failed" && $0.data["url"] as? String == url }
        #expect(told.count == 1, "\(events.events.map(\.line))", sourceLocation: sourceLocation)
        #expect(conditionals(server, prefix) == 1, sourceLocation: sourceLocation)
        let counted = try await stats(daemon)
        #expect((counted["failures"] as? [String: Any])?["http_500"] as? Int == 1, "\(counted)", sourceLocation: sourceLocation)
    }

    @Test("a due get is answered from the cache at once; the conditional request follows; 304 → revalidated (stats, event), same inode, freshness renewed; refresh off asks nothing")
    func dueGetRevalidates304() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try await withRunningServer { server in
            let daemon = try await DaemonProcess.start(in: scratch.path)
            defer { daemon.killIfRunning() }
            let events = try await daemon.subscribe(["revalidated", "fetched"])
            let url = server.url("/fresh/a.png?cc=max-age%3D3600")
            let first = try await Self.get(daemon, url)
            #expect(first["source"] as? String == "network")
            let path = try #require(first["path"] as? String)
            let inode = try Self.inode(path)
            let validatedBefore = try #require(try await Self.indexValue(scratch, "validated_at", of: url))
            let freshUntil = try #require(try await Self.indexValue(scratch, "fresh_until", of: url))
            #expect((3_599_000...3_601_000).contains(freshUntil - validatedBefore), "max-age=3600 stored as the lifetime")

            // The daemon's refresh is off: a plain get asks nothing.
            _ = try await Self.get(daemon, url)
            // With refresh 0s the entry is due: served from the cache, then revalidated.
            let due = try await Self.get(daemon, url, #","refresh":"0s""#)
            #expect(["disk", "memory"].contains(due["source"] as? String ?? ""), "\(due)")
            #expect(due["path"] as? String == path)
            let event = await events.first("revalidated") { $0["url"] as? String == url }
            #expect(event != nil, "no revalidated event: \(daemon.log)")
            #expect(Self.conditionals(server, "/fresh/a.png") == 1, "\(server.requestLog)")
            #expect(server.requestCount(prefix: "/fresh/a.png") == 2)
            let request = try #require(server.requests.last { $0.target.hasPrefix("/fresh/a.png") })
            #expect(request.values(of: "If-None-Match") == ["\"v1\""])
            #expect(request.values(of: "If-Modified-Since") == [TestHTTPServer.imageLastModified])
            #expect(try await Self.stats(daemon)["revalidated"] as? Int == 1)
            #expect(try Self.inode(path) == inode, "a 304 leaves the file as it was")
            #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == Data(TestHTTPServer.body(for: "/fresh/a.png?cc=max-age%3D3600")!))
            let validatedAfter = try #require(try await Self.indexValue(scratch, "validated_at", of: url))
            #expect(validatedAfter > validatedBefore, "the 304 renewed the entry's freshness")
            #expect(events.events.filter { $0.name == "fetched" }.count == 1, "a 304 is not a download")
            #expect(await daemon.stop() == 0)
        }
    }

    @Test("a due get is answered while its conditional request is still held by the origin; the revalidation ends once the origin answers")
    func dueGetAnsweredAtOnce() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try await withRunningServer { server in
            let daemon = try await Self.startWithDeliveryOutOfKeys(in: scratch, ["--refresh", "1d"])
            defer { daemon.killIfRunning() }
            let events = try await daemon.subscribe(["revalidated"])
            // One entry, fetched by a URL the origin answers at once; then used by a URL of the
            // same key whose every answer waits for a gate.
            let quick = server.url("/fresh/k.png?cc=no-cache"), held = server.url("/fresh/k.png?cc=no-cache&gate=k")
            _ = try await Self.get(daemon, quick)
            let served = try await Self.get(daemon, held)
            #expect(["disk", "memory"].contains(served["source"] as? String ?? ""), "\(served)")
            #expect(await server.waitForInFlight(atLeast: 1, timeout: .seconds(10)), "the conditional request reached the origin")
            #expect(Self.conditionals(server, "/fresh/k.png?cc=no-cache&gate=k") == 1)
            #expect(events.events.isEmpty, "not revalidated before the origin answers")
            server.openGate("k")
            #expect(await events.first("revalidated") { $0["url"] as? String == held } != nil, "\(daemon.log)")
            #expect(await daemon.stop() == 0)
        }
    }

    @Test("refresh reloads on SIGHUP: off, nothing asked; 1d, a no-cache entry is revalidated on its next use")
    func refreshReloads() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try scratch.write("imgd.toml", "refresh = \"off\"\n")
        try await withRunningServer { server in
            let daemon = try await DaemonProcess.start(in: scratch.path, arguments: ["--config", scratch.path + "/imgd.toml"])
            defer { daemon.killIfRunning() }
            let events = try await daemon.subscribe(["revalidated"])
            let url = server.url("/fresh/reload.png?cc=no-cache")
            _ = try await Self.get(daemon, url)
            _ = try await Self.get(daemon, url)
            try scratch.write("imgd.toml", "refresh = \"1d\"\n")
            kill(daemon.pid, SIGHUP)
            #expect(await eventually(timeout: .seconds(10)) { daemon.log.contains("reloaded: refresh = 1d") }, "\(daemon.log)")
            _ = try await Self.get(daemon, url)
            #expect(await events.first("revalidated") { $0["url"] as? String == url } != nil, "\(daemon.log)")
            #expect(Self.conditionals(server, "/fresh/reload.png") == 1, "off asked nothing before the reload")
            #expect(await daemon.stop() == 0)
        }
    }

    @Test("respect-headers: max-age=0 and no-cache are due, max-age=3600 and immutable are not; min-fresh floors a short lifetime")
    func respectHeadersRules() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try await withRunningServer { server in
            let daemon = try await DaemonProcess.start(in: scratch.path, arguments: ["--refresh", "respect-headers", "--min-fresh", "1h"])
            defer { daemon.killIfRunning() }
            let events = try await daemon.subscribe(["revalidated"])
            let long = server.url("/fresh/long.png?cc=max-age%3D3600")
            let immutable = server.url("/fresh/imm.png?cc=immutable")
            let floored = server.url("/fresh/floor.png?cc=max-age%3D0")
            let noCache = server.url("/fresh/nc.png?cc=no-cache")
            for url in [long, immutable, floored, noCache] { _ = try await Self.get(daemon, url) }
            for url in [long, immutable, floored, noCache] { _ = try await Self.get(daemon, url) }
            // no-cache is due whatever the floor; its 304 comes after any request queued before it.
            #expect(await events.first("revalidated") { $0["url"] as? String == noCache } != nil, "\(daemon.log)")
            #expect(Self.conditionals(server, "/fresh/nc.png") == 1)
            #expect(Self.conditionals(server, "/fresh/long.png") == 0)
            #expect(Self.conditionals(server, "/fresh/imm.png") == 0)
            #expect(Self.conditionals(server, "/fresh/floor.png") == 0, "max-age=0 waits for the 1h floor")
            #expect(await daemon.stop() == 0)
        }
        // Without the floor, max-age=0 and an Age as old as max-age are due at once; an Expires
        // an hour away is not.
        let again = try ScratchFolder()
        defer { again.remove() }
        try await withRunningServer { server in
            let daemon = try await DaemonProcess.start(in: again.path, arguments: ["--refresh", "respect-headers", "--min-fresh", "0s"])
            defer { daemon.killIfRunning() }
            let events = try await daemon.subscribe(["revalidated"])
            let expires = server.url("/fresh/exp.png?expires=3600")
            let expired = server.url("/fresh/old.png?expires=-10")
            let aged = server.url("/fresh/aged.png?cc=max-age%3D600&age=600")
            let shared = server.url("/fresh/shared.png?cc=max-age%3D0,s-maxage%3D3600")
            for url in [expires, shared, expired, aged] { _ = try await Self.get(daemon, url) }
            for url in [expires, shared, expired, aged] { _ = try await Self.get(daemon, url) }
            for url in [expired, aged] {
                #expect(await events.first("revalidated") { $0["url"] as? String == url } != nil, "\(url): \(daemon.log)")
            }
            #expect(Self.conditionals(server, "/fresh/exp.png") == 0)
            #expect(Self.conditionals(server, "/fresh/shared.png") == 0, "s-maxage wins over max-age")
            #expect(await daemon.stop() == 0)
        }
    }

    @Test("a 200 to a revalidation replaces the entry atomically: new bytes under the name, a reader of the old file keeps the old bytes")
    func changedBodyReplaces() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try await withRunningServer { server in
            let daemon = try await DaemonProcess.start(in: scratch.path, arguments: ["--refresh", "1d"])
            defer { daemon.killIfRunning() }
            let target = "/fresh/c.png?cc=no-cache&changes_at=2&w=32&h=32"
            let url = server.url(target)
            let first = try await Self.get(daemon, url)
            let path = try #require(first["path"] as? String)
            let old = try #require(FileHandle(forReadingAtPath: path))
            defer { try? old.close() }
            let oldBytes = try Data(contentsOf: URL(fileURLWithPath: path))
            let events = try await daemon.subscribe(["fetched"])
            let second = try await Self.get(daemon, url)
            #expect(second["sha256"] as? String == first["sha256"] as? String, "served as it was, then revalidated")
            #expect(await events.first("fetched") { $0["url"] as? String == url } != nil, "\(daemon.log)")
            let newBytes = try Data(contentsOf: URL(fileURLWithPath: path))
            #expect(newBytes == Data(TestHTTPServer.body(for: target)!))
            #expect(newBytes != oldBytes)
            #expect(try old.readToEnd() == oldBytes, "the old file stays readable to whoever opened it")
            let third = try await Self.get(daemon, url, #","refresh":"off""#)
            #expect(third["sha256"] as? String == SHA256Digest(of: Array(newBytes)).hex)
            #expect(await daemon.stop() == 0)
        }
    }

    @Test("no-store: not_cacheable, nothing cached, one request (not retried); the next URL of the list is cached")
    func noStore() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try await withRunningServer { server in
            let daemon = try await DaemonProcess.start(in: scratch.path)
            defer { daemon.killIfRunning() }
            let refused = server.url("/fresh/ns.png?cc=private,%20no-store")
            try daemon.drop("ns.txt", refused + "\n" + server.url("/img/after-ns.png") + "\n")
            let list = try #require(await daemon.finishedList("ns.txt"))
            #expect(list["cached"] as? Int == 1, "\(list)")
            #expect(list["failed"] as? Int == 1)
            let report = try #require(await daemon.report("ns.txt", in: "failed"))
            #expect((report["failed_by_code"] as? [String: Any])?["not_cacheable"] as? Int == 1, "\(report)")
            #expect(server.requestCount(prefix: "/fresh/ns.png") == 1, "\(server.requestLog)")
            let missing = try await daemon.call(#"{"cmd":"get","url":"\#(refused)","fetch":false}"#)
            #expect((missing["error"] as? [String: Any])?["code"] as? String == "not_found", "\(missing)")
            let got = try await daemon.call(#"{"cmd":"get","url":"\#(refused)"}"#)
            #expect((got["error"] as? [String: Any])?["code"] as? String == "not_cacheable", "\(got)")
            #expect(await daemon.stop() == 0)
        }
    }

    @Test("a list's # refresh: header and an object item's refresh make their cached URLs due; a list without either asks nothing")
    func listRules() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try await withRunningServer { server in
            let daemon = try await DaemonProcess.start(in: scratch.path)
            defer { daemon.killIfRunning() }
            let events = try await daemon.subscribe(["revalidated"])
            let text = server.url("/fresh/text.png?cc=max-age%3D3600"), item = server.url("/fresh/item.png?cc=max-age%3D3600")
            _ = try await Self.get(daemon, text)
            _ = try await Self.get(daemon, item)
            try daemon.drop("plain.txt", text + "\n" + item + "\n")
            #expect(try #require(await daemon.finishedList("plain.txt"))["already_cached"] as? Int == 2)
            try daemon.drop("header.txt", "# refresh: 0s\n" + text + "\n")
            #expect(try #require(await daemon.finishedList("header.txt"))["already_cached"] as? Int == 1)
            #expect(await events.first("revalidated") { $0["url"] as? String == text } != nil, "\(daemon.log)")
            let json = #"[{"url": "\#(item)", "refresh": "0s"}]"#
            try daemon.drop("items.json", json)
            #expect(try #require(await daemon.finishedList("items.json"))["already_cached"] as? Int == 1)
            #expect(await events.first("revalidated") { $0["url"] as? String == item } != nil, "\(daemon.log)")
            #expect(Self.conditionals(server, "/fresh/text.png") == 1)
            #expect(Self.conditionals(server, "/fresh/item.png") == 1)
            // A bad header fails the list as bad_list, naming it.
            try daemon.drop("bad.txt", "# refresh: sometimes\n" + text + "\n")
            let bad = try #require(await daemon.report("bad.txt", in: "failed"))
            #expect("\(bad)".contains("refresh"), "\(bad)")
            #expect(await daemon.stop() == 0)
        }
    }

    @Test("imgctl refresh URL… and --list: revalidated now, due or not, with counts; an uncached URL is counted, not fetched")
    func imgctlRefresh() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try await withRunningServer { server in
            let daemon = try await DaemonProcess.start(in: scratch.path)
            defer { daemon.killIfRunning() }
            let cached = server.url("/fresh/r.png?cc=max-age%3D3600"), changed = server.url("/fresh/r2.png?changes_at=2")
            let uncached = server.url("/fresh/never.png")
            _ = try await Self.get(daemon, cached)
            _ = try await Self.get(daemon, changed)
            let run = try await BinaryRunner.imgctl(["refresh", cached, changed, uncached, "--socket", daemon.socket], in: scratch.path)
            #expect(run.status == 0, "\(run.stderr)")
            #expect(run.stdout.contains("1 revalidated, 1 replaced, 0 failed, 1 not cached"), "\(run.stdout)")
            #expect(Self.conditionals(server, "/fresh/r.png") == 1)
            #expect(server.requestCount(prefix: "/fresh/never.png") == 0)

            try daemon.drop("refresh-me.txt", cached + "\n")
            _ = await daemon.finishedList("refresh-me.txt")
            let byList = try await daemon.result(#"{"cmd":"refresh","list":"refresh-me.txt"}"#)
            #expect(byList["revalidated"] as? Int == 1, "\(byList)")
            #expect(Self.conditionals(server, "/fresh/r.png") == 2)
            let unknown = try await daemon.call(#"{"cmd":"refresh","list":"no-such-list"}"#)
            #expect((unknown["error"] as? [String: Any])?["code"] as? String == "not_found", "\(unknown)")
            let usage = try await BinaryRunner.imgctl(["refresh", "--socket", daemon.socket], in: scratch.path)
            #expect(usage.status == 2)
            #expect(await daemon.stop() == 0)
        }
    }

    @Test("a revalidation that fails (500) keeps serving the entry, and says so with one failed event: later uses while it is remembered ask and tell nothing")
    func failedRevalidationKeepsServing() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try await withRunningServer { server in
            let daemon = try await DaemonProcess.start(in: scratch.path, arguments: ["--refresh", "1d", "--attempts", "1"])
            defer { daemon.killIfRunning() }
            let events = try await daemon.subscribe(["failed"])
            let url = server.url("/fresh/f.png?cc=no-cache&cond_status=500")
            let first = try await Self.get(daemon, url)
            let second = try await Self.get(daemon, url)
            #expect(second["sha256"] as? String == first["sha256"] as? String)
            let failed = await events.first("failed") { $0["url"] as? String == url }
            #expect(failed?.data["code"] as? String == "http_500", "\(daemon.log)")
            for _ in 0..<3 {
                let later = try await Self.get(daemon, url)
                #expect(["disk", "memory"].contains(later["source"] as? String ?? ""), "\(later)")
                #expect(FileManager.default.fileExists(atPath: later["path"] as? String ?? ""))
            }
            try await Self.expectToldOnce(url, daemon: daemon, events: events, server: server, conditionalsTo: "/fresh/f.png")
            #expect(await daemon.stop() == 0)
        }
    }

    @Test("uses of a due entry while its revalidation is held by the origin ask nothing more: its failure (500) is one failed event, one failure counted")
    func usesWhileRevalidationUnderWay() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try await withRunningServer { server in
            let daemon = try await Self.startWithDeliveryOutOfKeys(in: scratch, ["--refresh", "1d", "--attempts", "1"])
            defer { daemon.killIfRunning() }
            let events = try await daemon.subscribe(["failed"])
            // One entry, fetched by a URL answered at once; then used by one of the same key
            // whose every answer waits for a gate, and whose conditional requests get a 500.
            let quick = server.url("/fresh/w.png?cc=no-cache"), held = server.url("/fresh/w.png?cc=no-cache&cond_status=500&gate=w")
            _ = try await Self.get(daemon, quick)
            for _ in 0..<4 {
                let served = try await Self.get(daemon, held)
                #expect(["disk", "memory"].contains(served["source"] as? String ?? ""), "\(served)")
            }
            #expect(await server.waitForInFlight(atLeast: 1, timeout: .seconds(10)), "the conditional request reached the origin")
            server.openGate("w")
            #expect(await events.first("failed") { $0["url"] as? String == held } != nil, "\(daemon.log)")
            try await Self.expectToldOnce(held, daemon: daemon, events: events, server: server, conditionalsTo: "/fresh/w.png")
            #expect(await daemon.stop() == 0)
        }
    }

    @Test("a revalidation that times out keeps serving the entry: failed as timeout, the file as it was")
    func timedOutRevalidationKeepsServing() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try await withRunningServer { server in
            let daemon = try await Self.startWithDeliveryOutOfKeys(in: scratch, ["--refresh", "1d", "--attempts", "1", "--timeout", "1s"])
            defer { daemon.killIfRunning() }
            let events = try await daemon.subscribe(["failed"])
            // Cached by a URL answered at once; used by one of the same key whose answers never
            // come (a gate never opened).
            let quick = server.url("/fresh/t.png?cc=no-cache"), stalled = server.url("/fresh/t.png?cc=no-cache&gate=never")
            let first = try await Self.get(daemon, quick)
            let path = try #require(first["path"] as? String)
            let inode = try Self.inode(path)
            _ = try await Self.get(daemon, stalled)
            let failed = await events.first("failed") { $0["url"] as? String == stalled }
            #expect(failed?.data["code"] as? String == "timeout", "\(daemon.log)")
            #expect(Self.conditionals(server, "/fresh/t.png?cc=no-cache&gate=never") == 1, "the timed-out request was the revalidation")
            let after = try await Self.get(daemon, quick, #","refresh":"off""#)
            #expect(after["sha256"] as? String == first["sha256"] as? String)
            #expect(try Self.inode(path) == inode)
            #expect(await daemon.stop() == 0)
        }
    }

    @Test("over https with HTTP/2: the conditional request goes out on h2 and its 304 is counted")
    func revalidationOverHTTP2() async throws {
        let certificates = try await TestCertificates.shared()
        let server = try await TestHTTPServer.start(tls: TestHTTPServer.TLS(certificates.valid))
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let daemon = try await DaemonProcess.start(in: scratch.path, arguments: ["--ca-file", certificates.caFile, "--refresh", "1d"])
        defer { daemon.killIfRunning() }
        let events = try await daemon.subscribe(["revalidated"])
        let url = server.url("/fresh/h2.png?cc=no-cache")
        _ = try await Self.get(daemon, url)
        _ = try await Self.get(daemon, url)
        #expect(await events.first("revalidated") { $0["url"] as? String == url } != nil, "\(daemon.log)")
        #expect(server.http2Requests == 2)
        #expect(Self.conditionals(server, "/fresh/h2.png") == 1)
        #expect(try await Self.stats(daemon)["revalidated"] as? Int == 1)
        _ = await daemon.stop()
        try await server.shutdown()
    }
}
