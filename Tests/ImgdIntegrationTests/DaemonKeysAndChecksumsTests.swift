import Foundation
import ImgdCore
import ImgdTestSupport
import Testing

/// Signed URLs' keys (`key-ignore-query`), chosen keys, and object lists with checksums,
/// against the real imgd and the test server.
@Suite("imgd: cache keys for signed URLs, object lists and checksums (the real binary)", .timeLimit(.minutes(5)), .offThePool)
struct DaemonKeysAndChecksumsTests {
    private static func sha256(_ pathAndQuery: String) -> String {
        SHA256Digest(of: TestHTTPServer.body(for: pathAndQuery)!).hex
    }

    private static func json(_ object: Any) -> String {
        String(decoding: try! JSONSerialization.data(withJSONObject: object, options: [.withoutEscapingSlashes, .sortedKeys]), as: UTF8.self)
    }

    private static func entries(_ daemon: DaemonProcess) async throws -> Int? {
        (try await daemon.result(#"{"cmd":"status"}"#)["cache"] as? [String: Any])?["entries"] as? Int
    }

    @Test("key-ignore-query: two lists naming one image with different signatures → one download, one entry; get by any form finds it; other hosts keep the whole URL")
    func signedURLs() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try scratch.write("imgd.toml", """
            [host."127.0.0.1"]
            key-ignore-query = ["X-Amz-*", "Expires"]
            """)
        try await withRunningServer { server in
            let daemon = try await DaemonProcess.start(in: scratch.path, arguments: ["--config", scratch.path + "/imgd.toml"])
            defer { daemon.killIfRunning() }
            try daemon.drop("first.txt", server.url("/img/signed.png?w=1&X-Amz-Signature=aaa&Expires=1") + "\n")
            let first = try #require(await daemon.finishedList("first.txt"))
            #expect(first["cached"] as? Int == 1)
            try daemon.drop("second.txt", server.url("/img/signed.png?w=1&X-Amz-Signature=bbb&X-Amz-Credential=c&Expires=2") + "\n")
            let second = try #require(await daemon.finishedList("second.txt"))
            #expect(second["already_cached"] as? Int == 1, "\(second)")
            #expect(server.requestCount(prefix: "/img/signed.png") == 1, "\(server.requestLog)")
            #expect(try await Self.entries(daemon) == 1)

            // get by a third signature, and by the URL without any: the entry, no request.
            for form in ["/img/signed.png?w=1&X-Amz-Signature=ccc", "/img/signed.png?w=1"] {
                let got = try await daemon.result(#"{"cmd":"get","url":"\#(server.url(form))"}"#)
                #expect(["disk", "memory"].contains(got["source"] as? String ?? ""), "\(form): \(got)")
            }
            #expect(server.requestCount(prefix: "/img/signed.png") == 1)
            // The rest of the query still counts: another width is another image.
            _ = try await daemon.result(#"{"cmd":"get","url":"\#(server.url("/img/signed.png?w=2&X-Amz-Signature=aaa"))"}"#)
            #expect(server.requestCount(prefix: "/img/signed.png") == 2)

            // A host without a table keeps its whole URL in the key: localhost ≠ 127.0.0.1.
            let other = "http://localhost:\(server.port)/img/other.png"
            _ = try await daemon.result(#"{"cmd":"get","url":"\#(other)?X-Amz-Signature=1"}"#)
            _ = try await daemon.result(#"{"cmd":"get","url":"\#(other)?X-Amz-Signature=2"}"#)
            #expect(server.requestCount(prefix: "/img/other.png") == 2)
            #expect(await daemon.stop() == 0)
        }
    }

    @Test("a reload changes the key rule: from then on a new signature is found under the new key")
    func reloadKeyRule() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try scratch.write("imgd.toml", "max-parallel = 4\n")
        try await withRunningServer { server in
            let daemon = try await DaemonProcess.start(in: scratch.path, arguments: ["--config", scratch.path + "/imgd.toml"])
            defer { daemon.killIfRunning() }
            _ = try await daemon.result(#"{"cmd":"get","url":"\#(server.url("/img/r.png?sig=1"))"}"#)
            _ = try await daemon.result(#"{"cmd":"get","url":"\#(server.url("/img/r.png?sig=2"))"}"#)
            #expect(server.requestCount(prefix: "/img/r.png") == 2)
            try scratch.write("imgd.toml", "max-parallel = 4\n[host.\"127.0.0.1\"]\nkey-ignore-query = [\"sig\"]\n")
            kill(daemon.pid, SIGHUP)
            #expect(await eventually(timeout: .seconds(10)) { daemon.log.contains("reloaded: host tables = 127.0.0.1 (key-ignore-query: sig)") }, "\(daemon.log)")
            _ = try await daemon.result(#"{"cmd":"get","url":"\#(server.url("/img/r.png?sig=3"))"}"#)
            _ = try await daemon.result(#"{"cmd":"get","url":"\#(server.url("/img/r.png?sig=4"))"}"#)
            #expect(server.requestCount(prefix: "/img/r.png") == 3, "\(server.requestLog)")
            #expect(await daemon.stop() == 0)
        }
    }

    @Test("an object list: a good sha256 is cached; a wrong one fails checksum_mismatch after exactly two requests and caches nothing; the next list with the right digest succeeds")
    func checksums() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try await withRunningServer { server in
            let daemon = try await DaemonProcess.start(in: scratch.path)
            defer { daemon.killIfRunning() }
            let good = "/img/good.png", bad = "/img/bad.png"
            let wrong = String(repeating: "0", count: 64)
            try daemon.drop("sums.json", Self.json([
                ["url": server.url(good), "sha256": Self.sha256(good), "ignored": ["future": 1]],
                ["url": server.url(bad), "sha256": wrong],
                ["url": server.url("/img/x.png"), "sha256": "xyz"],
            ]))
            let list = try #require(await daemon.finishedList("sums.json"))
            #expect(list["cached"] as? Int == 1, "\(list)")
            #expect(list["failed"] as? Int == 2)
            #expect(server.requestCount(bad) == 2, "\(server.requestLog)")
            #expect(server.requestCount("/img/x.png") == 0)
            let report = try #require(await daemon.report("sums.json", in: "failed"))
            let failures = try #require(report["failures"] as? [[String: Any]])
            let codes = failures.map { "\($0["code"] as? String ?? "?") \($0["message"] as? String ?? "")" }
            #expect(codes.contains { $0.hasPrefix("checksum_mismatch the body's SHA-256 is \(Self.sha256(bad)), not the \(wrong) asked for") }, "\(codes)")
            #expect(codes.contains { $0.hasPrefix("bad_url") && $0.contains("bad sha256") }, "\(codes)")
            // Nothing was cached under the bad one's key.
            let missing = try await daemon.call(#"{"cmd":"get","url":"\#(server.url(bad))","fetch":false}"#)
            #expect((missing["error"] as? [String: Any])?["code"] as? String == "not_found", "\(missing)")

            // The failure is not remembered against the URL: the right digest succeeds at once.
            try daemon.drop("fixed.json", Self.json([["url": server.url(bad), "sha256": Self.sha256(bad)]]))
            let fixed = try #require(await daemon.finishedList("fixed.json"))
            #expect(fixed["cached"] as? Int == 1, "\(fixed)")
            #expect(server.requestCount(bad) == 3)

            // Already cached with that digest: no request. A get naming another digest fetches
            // again and, the body differing, fails without losing the entry.
            try daemon.drop("again.json", Self.json([["url": server.url(good), "sha256": Self.sha256(good)]]))
            let again = try #require(await daemon.finishedList("again.json"))
            #expect(again["already_cached"] as? Int == 1, "\(again)")
            #expect(server.requestCount(good) == 1)
            let mismatch = try await daemon.call(#"{"cmd":"get","url":"\#(server.url(good))","sha256":"\#(wrong)"}"#)
            #expect((mismatch["error"] as? [String: Any])?["code"] as? String == "checksum_mismatch", "\(mismatch)")
            #expect(server.requestCount(good) == 3)
            let kept = try await daemon.result(#"{"cmd":"get","url":"\#(server.url(good))","fetch":false}"#)
            #expect(kept["bytes"] as? Int == TestHTTPServer.body(for: good)!.count)
            #expect(await daemon.stop() == 0)
        }
    }

    @Test("a body written out as it arrives (over the 64 KiB buffer) is checked the same way: a wrong digest leaves no file, the right one is cached")
    func spilledChecksum() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try await withRunningServer { server in
            let daemon = try await DaemonProcess.start(in: scratch.path)
            defer { daemon.killIfRunning() }
            let big = "/img/big.png?bytes=400000"
            let wrong = String(repeating: "f", count: 64)
            let failed = try await daemon.call(#"{"cmd":"get","url":"\#(server.url(big))","sha256":"\#(wrong)"}"#)
            #expect((failed["error"] as? [String: Any])?["code"] as? String == "checksum_mismatch", "\(failed)")
            #expect(server.requestCount(big) == 2)
            #expect(try await Self.entries(daemon) == 0)
            let tmp = scratch.path + "/imgd-data/cache/tmp"
            #expect(((try? FileManager.default.contentsOfDirectory(atPath: tmp)) ?? []).isEmpty)
            let got = try await daemon.result(#"{"cmd":"get","url":"\#(server.url(big))","sha256":"\#(Self.sha256(big))"}"#)
            #expect(got["bytes"] as? Int == TestHTTPServer.body(for: big)!.count)
            #expect(await daemon.stop() == 0)
        }
    }

    @Test("imgd prefetch reads object lists too: a wrong sha256 fails checksum_mismatch (exit 1), a right one is cached")
    func prefetchCommandChecksums() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try await withRunningServer { server in
            try scratch.write("list.json", Self.json([
                ["url": server.url("/img/p1.png"), "sha256": Self.sha256("/img/p1.png")],
                ["url": server.url("/img/p2.png"), "sha256": String(repeating: "1", count: 64)],
            ]))
            let run = try await BinaryRunner.imgd(["prefetch", "list.json", "--cache", "c"], in: scratch.path)
            #expect(run.status == 1, "\(run.stdout)\(run.stderr)")
            #expect(run.stderr.contains("checksum_mismatch"), "\(run.stderr)")
            #expect(server.requestCount("/img/p2.png") == 2)
            #expect(server.requestCount("/img/p1.png") == 1)
        }
    }

    @Test("chosen keys: two URLs with one key share one entry; get with the key finds it; add takes objects and rejects a bad one alone")
    func chosenKeys() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try await withRunningServer { server in
            let daemon = try await DaemonProcess.start(in: scratch.path)
            defer { daemon.killIfRunning() }
            try daemon.drop("keys.json", Self.json([
                ["url": server.url("/img/k1.png?seed=5"), "key": "product-7"],
                ["url": server.url("/img/k2.png?seed=5"), "key": "product-7"],
            ]))
            let list = try #require(await daemon.finishedList("keys.json"))
            #expect((list["cached"] as? Int ?? 0) + (list["already_cached"] as? Int ?? 0) == 2, "\(list)")
            #expect(server.requestCount(prefix: "/img/k1.png") + server.requestCount(prefix: "/img/k2.png") == 1, "\(server.requestLog)")
            #expect(try await Self.entries(daemon) == 1)
            let got = try await daemon.result(#"{"cmd":"get","url":"\#(server.url("/img/k3.png"))","key":"product-7","fetch":false}"#)
            #expect(got["bytes"] as? Int == TestHTTPServer.body(for: "/img/k1.png?seed=5")!.count)

            let added = try await daemon.result(
                #"{"cmd":"add","urls":["\#(server.url("/img/a1.png"))",{"url":"\#(server.url("/img/a2.png"))","key":"a-two","pin":"1h","priority":"high"},{"url":"\#(server.url("/img/a3.png"))","sha256":"no"}]}"#)
            #expect(added["accepted"] as? Int == 2)
            let rejected = try #require(added["rejected"] as? [[String: Any]])
            #expect(rejected.count == 1)
            #expect((rejected.first?["message"] as? String)?.contains("bad sha256") == true, "\(rejected)")
            #expect(await eventually(timeout: .seconds(20)) {
                (try? await daemon.call(#"{"cmd":"get","url":"http://unused.invalid/x.png","key":"a-two","fetch":false}"#))?["result"] != nil
            })
            let notObject = try await daemon.call(#"{"cmd":"add","urls":[5]}"#)
            #expect((notObject["error"] as? [String: Any])?["code"] as? String == "invalid_argument", "\(notObject)")
            #expect(await daemon.stop() == 0)
        }
    }

    @Test("an item marked high is fetched before the list's other items")
    func highFirst() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try await withRunningServer { server in
            let daemon = try await DaemonProcess.start(in: scratch.path, arguments: ["--max-parallel", "1"])
            defer { daemon.killIfRunning() }
            var items: [Any] = (0..<40).map { server.url("/img/n\($0).png") }
            items.append(["url": server.url("/img/urgent.png"), "priority": "high"])
            try daemon.drop("mixed.json", Self.json(items))
            let list = try #require(await daemon.finishedList("mixed.json"))
            #expect(list["cached"] as? Int == 41, "\(list)")
            let order = server.requestLog.filter { $0.contains("/img/") }
            #expect(order.first?.contains("/img/urgent.png") == true, "\(order.prefix(5))")
            #expect(await daemon.stop() == 0)
        }
    }

    @Test("host tables in the file: a bad pattern, an unknown key or a bad parameter name is exit 2 naming the file and line")
    func badHostTables() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        for (text, expected) in [
            ("[host.\"a.*.example.com\"]\nkey-ignore-query = [\"sig\"]\n", "imgd.toml:1: [host.\"a.*.example.com\"]: 'a.*.example.com' is not a host pattern"),
            ("[host.\"images.example.com\"]\nspeed = 3\n", "imgd.toml:2: unknown setting speed in [host.\"images.example.com\"]"),
            ("[host.\"images.example.com\"]\nkey-ignore-query = [\"a=b\"]\n", "imgd.toml:2: [host.\"images.example.com\"] key-ignore-query: 'a=b'"),
            ("[host.\"images.example.com\"]\nkey-ignore-query = \"sig\"\n", "expected an array of parameter names"),
        ] {
            try scratch.write("imgd.toml", text)
            let run = try await BinaryRunner.imgd(["--config", scratch.path + "/imgd.toml"], in: scratch.path)
            #expect(run.status == 2, "\(text): \(run.stderr)")
            #expect(run.stderr.contains(expected), "\(text): \(run.stderr)")
        }
    }
}
