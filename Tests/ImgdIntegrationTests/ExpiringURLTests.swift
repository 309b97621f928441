import Foundation
import ImgdCore
import ImgdTestSupport
import Testing

/// Signed URLs that say when they expire, against the real imgd and the test server: an expired
/// one is never requested and is reported for re-signing, the soonest to expire go first, one
/// that expires while queued or before its 403 is `url_expired`, and nothing of it is
/// remembered against a re-signed URL of the same key.
@Suite("imgd: expiring signed URLs (the real binary)", .timeLimit(.minutes(5)), .offThePool)
struct ExpiringURLTests {
    /// `X-Amz-Date` and `X-Amz-Expires` for a URL signed at `signedAt` (milliseconds since 1970)
    /// that lives `lifetime` seconds, with a signature `signature`.
    static func amz(signedAt: Int, lifetime: Int, signature: String = "s") -> String {
        let date = URLExpiry.iso8601(milliseconds: signedAt).filter { $0 != "-" && $0 != ":" }
        return "X-Amz-Date=\(date)&X-Amz-Expires=\(lifetime)&X-Amz-Signature=\(signature)"
    }

    /// CloudFront's `Expires` (epoch seconds) and `Signature`.
    static func cloudFront(expiresAt seconds: Int, signature: String = "s") -> String {
        "Expires=\(seconds)&Signature=\(signature)&Key-Pair-Id=K"
    }

    static var nowSeconds: Int { URLExpiry.now() / 1000 }

    @Test("an expired URL in a list is never requested, fails url_expired with its expiry, is in the report's expired array; retry requeues none and says to re-sign")
    func expiredInList() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try await withRunningServer { server in
            let daemon = try await DaemonProcess.start(in: scratch.path)
            defer { daemon.killIfRunning() }
            let signedAt = (Self.nowSeconds - 7200) * 1000
            let expired = server.url("/img/old.png?" + Self.amz(signedAt: signedAt, lifetime: 3600))
            let fresh = server.url("/img/new.png?" + Self.cloudFront(expiresAt: Self.nowSeconds + 3600))
            try daemon.drop("signed.txt", expired + "\n" + fresh + "\n")
            let list = try #require(await daemon.finishedList("signed.txt"))
            #expect(list["cached"] as? Int == 1, "\(list)")
            #expect(list["failed"] as? Int == 1)
            #expect(server.requestCount(prefix: "/img/old.png") == 0, "\(server.requestLog)")
            #expect(server.requestCount(prefix: "/img/new.png") == 1)

            let report = try #require(await daemon.report("signed.txt", in: "failed"))
            let expiresAt = URLExpiry.iso8601(milliseconds: signedAt + 3_600_000)
            let listed = try #require(report["expired"] as? [[String: Any]], "\(report)")
            #expect(listed.count == 1)
            #expect(listed.first?["url"] as? String == expired)
            #expect(listed.first?["expires_at"] as? String == expiresAt)
            #expect(listed.first?["line"] as? Int == 1)
            #expect((report["failed_by_code"] as? [String: Int])?["url_expired"] == 1)
            let failure = try #require((report["failures"] as? [[String: Any]])?.first)
            #expect(failure["code"] as? String == "url_expired")
            #expect((failure["message"] as? String)?.contains(expiresAt) == true, "\(failure)")

            let retried = try await daemon.result(#"{"cmd":"retry","list":"signed.txt"}"#)
            #expect(retried["requeued"] as? Int == 0, "\(retried)")
            #expect(retried["expired"] as? Int == 1)
            #expect((retried["message"] as? String)?.contains("re-sign") == true, "\(retried)")
            #expect(server.requestCount(prefix: "/img/old.png") == 0)

            let stats = try await daemon.result(#"{"cmd":"stats"}"#)
            #expect((stats["failures"] as? [String: Int])?["url_expired"] == 1, "\(stats)")
            #expect(await daemon.stop() == 0)
        }
    }

    @Test("within a list, the high items first, then the URLs that expire soonest, then those with no known expiry, each in list order")
    func soonestFirst() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try await withRunningServer { server in
            let daemon = try await DaemonProcess.start(in: scratch.path, arguments: ["--max-parallel", "1"])
            defer { daemon.killIfRunning() }
            let now = Self.nowSeconds
            // The first request holds the only slot until every other one is queued behind it.
            let items: [[String: String]] = [
                ["url": server.url("/img/plain1.png")],
                ["url": server.url("/img/late.png?" + Self.cloudFront(expiresAt: now + 7200))],
                ["url": server.url("/img/high.png?gate=go"), "priority": "high"],
                ["url": server.url("/img/soon.png?" + Self.amz(signedAt: now * 1000, lifetime: 600))],
                ["url": server.url("/img/plain2.png")],
                ["url": server.url("/img/middle.png?" + Self.cloudFront(expiresAt: now + 3600))],
                ["url": server.url("/img/soon2.png?" + Self.amz(signedAt: now * 1000, lifetime: 600))],
            ]
            let data = try JSONSerialization.data(withJSONObject: items, options: [.withoutEscapingSlashes])
            try daemon.drop("order.json", String(decoding: data, as: UTF8.self))
            #expect(await server.waitForInFlight(atLeast: 1, timeout: .seconds(20)))
            server.openGate("go")
            let list = try #require(await daemon.finishedList("order.json"))
            #expect(list["cached"] as? Int == 7, "\(list)")
            let order = server.requestLog.map { $0.split(separator: "?").first.map(String.init) ?? $0 }
            #expect(order == [
                "/img/high.png", "/img/soon.png", "/img/soon2.png", "/img/middle.png", "/img/late.png", "/img/plain1.png",
                "/img/plain2.png",
            ], "\(server.requestLog)")
            #expect(await daemon.stop() == 0)
        }
    }

    @Test("a URL that expires while it waits in the queue is not requested; a re-signed URL of the same key is fetched at once after it")
    func expiresWhileQueued() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try scratch.write("imgd.toml", """
            max-parallel = 1
            [host."127.0.0.1"]
            key-ignore-query = ["Expires", "Signature", "Key-Pair-Id"]
            """)
        try await withRunningServer { server in
            let daemon = try await DaemonProcess.start(in: scratch.path, arguments: ["--config", scratch.path + "/imgd.toml"])
            defer { daemon.killIfRunning() }
            // Enough for the claim and the hand-over on a loaded machine; it lapses while queued.
            let expiresAt = Self.nowSeconds + 4
            let items: [[String: String]] = [
                ["url": server.url("/img/holder.png?gate=hold"), "priority": "high"],
                ["url": server.url("/img/brief.png?" + Self.cloudFront(expiresAt: expiresAt))],
            ]
            let data = try JSONSerialization.data(withJSONObject: items, options: [.withoutEscapingSlashes])
            try daemon.drop("brief.json", String(decoding: data, as: UTF8.self))
            #expect(await server.waitForInFlight(atLeast: 1, timeout: .seconds(20)))
            // The brief URL was handed over before it expired, and waits behind the holder.
            #expect(await eventually(timeout: .seconds(20)) {
                (try? await daemon.result(#"{"cmd":"status"}"#))?["queued"] as? Int == 1
            })
            // Waits for the wall clock, not for the daemon: the URL must lapse while it is queued.
            #expect(await eventually(timeout: .seconds(20)) { URLExpiry.now() >= expiresAt * 1000 })
            server.openGate("hold")
            let list = try #require(await daemon.finishedList("brief.json"))
            #expect(list["cached"] as? Int == 1, "\(list)")
            #expect(list["failed"] as? Int == 1)
            #expect(server.requestCount(prefix: "/img/brief.png") == 0, "\(server.requestLog)")
            let report = try #require(await daemon.report("brief.json", in: "failed"))
            let listed = try #require(report["expired"] as? [[String: Any]], "\(report)")
            #expect(listed.first?["expires_at"] as? String == URLExpiry.iso8601(milliseconds: expiresAt * 1000))

            // Not remembered against the key: the re-signed URL is fetched now.
            let resigned = server.url("/img/brief.png?" + Self.cloudFront(expiresAt: Self.nowSeconds + 3600, signature: "new"))
            let got = try await daemon.result(#"{"cmd":"get","url":"\#(resigned)"}"#)
            #expect(got["source"] as? String == "network", "\(got)")
            #expect(server.requestCount(prefix: "/img/brief.png") == 1)
            #expect(await daemon.stop() == 0)
        }
    }

    @Test("a 403 at or after the URL's expiry is url_expired (and not remembered); a 403 before it stays http_403")
    func forbiddenPastExpiry() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try await withRunningServer { server in
            let daemon = try await DaemonProcess.start(in: scratch.path)
            defer { daemon.killIfRunning() }
            let expiresAt = Self.nowSeconds + 4
            let lapsing = server.url("/status/403?gate=late&" + Self.cloudFront(expiresAt: expiresAt))
            let valid = server.url("/status/403?" + Self.cloudFront(expiresAt: Self.nowSeconds + 3600))
            try daemon.drop("denied.txt", lapsing + "\n" + valid + "\n")
            // The lapsing URL's request is under way (held at the gate) before it expires.
            #expect(await eventually(timeout: .seconds(20)) { server.requestCount(prefix: "/status/403?gate=late") == 1 })
            #expect(await eventually(timeout: .seconds(20)) { URLExpiry.now() >= expiresAt * 1000 })
            server.openGate("late")
            let list = try #require(await daemon.finishedList("denied.txt"))
            #expect(list["failed"] as? Int == 2, "\(list)")
            let report = try #require(await daemon.report("denied.txt", in: "failed"))
            let codes = Dictionary(
                ((report["failures"] as? [[String: Any]]) ?? []).map { ($0["url"] as? String ?? "", $0["code"] as? String ?? "") },
                uniquingKeysWith: { first, _ in first })
            #expect(codes[lapsing] == "url_expired", "\(report)")
            #expect(codes[valid] == "http_403", "\(report)")
            let message = ((report["failures"] as? [[String: Any]]) ?? []).first { $0["url"] as? String == lapsing }?["message"] as? String
            #expect(message?.contains("HTTP 403") == true && message?.contains(URLExpiry.iso8601(milliseconds: expiresAt * 1000)) == true)
            #expect((report["expired"] as? [[String: Any]])?.map { $0["url"] as? String } == [lapsing])

            // Not remembered: the failure memory answers the http_403 URL, not the expired one.
            let remembered = try await daemon.result(#"{"cmd":"failed"}"#)
            let urls = ((remembered["failures"] as? [[String: Any]]) ?? []).compactMap { $0["url"] as? String }
            #expect(urls.contains(valid), "\(remembered)")
            #expect(!urls.contains(lapsing), "\(remembered)")
            #expect(await daemon.stop() == 0)
        }
    }

    @Test("a retry that would start after the URL's expiry is not waited for: the URL ends url_expired after its one request")
    func retryPastExpiry() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try await withRunningServer { server in
            let daemon = try await DaemonProcess.start(in: scratch.path)
            defer { daemon.killIfRunning() }
            let expiresAt = Self.nowSeconds + 20
            // 503 with Retry-After 60: the retry would start 40 s after the URL expires.
            let busy = server.url("/flaky/busy.png?fail=5&status=503&retry_after=60&" + Self.cloudFront(expiresAt: expiresAt))
            let started = ContinuousClock.now
            try daemon.drop("busy.txt", busy + "\n")
            let list = try #require(await daemon.finishedList("busy.txt", timeout: .seconds(15)))
            #expect(list["failed"] as? Int == 1, "\(list)")
            #expect(ContinuousClock.now - started < .seconds(15))
            #expect(server.requestCount(prefix: "/flaky/busy.png") == 1, "\(server.requestLog)")
            let report = try #require(await daemon.report("busy.txt", in: "failed"))
            #expect((report["failed_by_code"] as? [String: Int])?["url_expired"] == 1, "\(report)")
            #expect(await daemon.stop() == 0)
        }
    }

    @Test(
        "a member's URL that expires while queued does not fail another user's fresh URL of the same key that joined it: the fresh one is fetched",
        .enabled(if: OtherUser.available, "needs root and util-linux's setpriv to act as a second uid"))
    func memberCannotExpireAnotherUsersRequest() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try scratch.write("imgd.toml", """
            max-parallel = 1
            [host."127.0.0.1"]
            key-ignore-query = ["Expires", "Signature", "Key-Pair-Id"]
            """)
        try await withRunningServer { server in
            let daemon = try await DaemonProcess.startShared(in: scratch, ["--config", scratch.path + "/imgd.toml"])
            defer { daemon.killIfRunning() }
            _ = try await daemon.result(#"{"cmd":"get","url":"\#(server.url("/img/holder.png?gate=hold"))","wait":false}"#)
            #expect(await server.waitForInFlight(atLeast: 1, timeout: .seconds(20)))
            let expiresAt = Self.nowSeconds + 4
            let theirs = server.url("/img/shared.png?" + Self.cloudFront(expiresAt: expiresAt, signature: "member"))
            let added = try await OtherUser.plain.result(jsonLine(["cmd": "add", "urls": [theirs]]), socket: daemon.socket)
            #expect(added["accepted"] as? Int == 1, "\(added)")
            #expect(await eventually(timeout: .seconds(20)) {
                (try? await daemon.result(#"{"cmd":"status"}"#))?["queued"] as? Int == 1
            })
            // Root's own URL of the same key joins the member's job while it waits.
            let mine = server.url("/img/shared.png?" + Self.cloudFront(expiresAt: Self.nowSeconds + 3600, signature: "root"))
            _ = try await daemon.result(#"{"cmd":"add","urls":["\#(mine)"]}"#)
            #expect(await eventually(timeout: .seconds(20)) { URLExpiry.now() >= expiresAt * 1000 })
            server.openGate("hold")
            #expect(await eventually(timeout: .seconds(20)) {
                (try? await daemon.call(#"{"cmd":"get","url":"\#(mine)","fetch":false}"#))?["result"] != nil
            })
            #expect(server.requestCount(prefix: "/img/shared.png") == 1, "\(server.requestLog)")
            #expect(server.requestLog.contains { $0.hasPrefix("/img/shared.png") && $0.contains("Signature=root") }, "\(server.requestLog)")
            #expect(await daemon.stop() == 0)
        }
    }

    @Test("get and add of an expired URL answer url_expired with its expiry and request nothing; a cached image is still served")
    func getAndAdd() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try scratch.write("imgd.toml", """
            [host."127.0.0.1"]
            key-ignore-query = ["X-Amz-*"]
            """)
        try await withRunningServer { server in
            let daemon = try await DaemonProcess.start(in: scratch.path, arguments: ["--config", scratch.path + "/imgd.toml"])
            defer { daemon.killIfRunning() }
            let signedAt = (Self.nowSeconds - 7200) * 1000
            let expiresAt = URLExpiry.iso8601(milliseconds: signedAt + 60_000)
            let expired = server.url("/img/g.png?" + Self.amz(signedAt: signedAt, lifetime: 60))
            let got = try await daemon.call(#"{"cmd":"get","url":"\#(expired)"}"#)
            let error = try #require(got["error"] as? [String: Any], "\(got)")
            #expect(error["code"] as? String == "url_expired")
            #expect((error["message"] as? String)?.contains(expiresAt) == true, "\(error)")

            let added = try await daemon.result(#"{"cmd":"add","urls":["\#(expired)"]}"#)
            #expect(added["accepted"] as? Int == 0, "\(added)")
            let rejected = try #require((added["rejected"] as? [[String: Any]])?.first, "\(added)")
            #expect(rejected["code"] as? String == "url_expired")
            #expect((rejected["message"] as? String)?.contains(expiresAt) == true)
            #expect(server.requestCount(prefix: "/img/g.png") == 0, "\(server.requestLog)")

            // Re-signed: fetched. Then the expired form finds the cached image (no request).
            let fresh = server.url("/img/g.png?" + Self.amz(signedAt: Self.nowSeconds * 1000, lifetime: 3600, signature: "t"))
            let fetched = try await daemon.result(#"{"cmd":"get","url":"\#(fresh)"}"#)
            #expect(fetched["source"] as? String == "network", "\(fetched)")
            let served = try await daemon.result(#"{"cmd":"get","url":"\#(expired)"}"#)
            #expect(["disk", "memory"].contains(served["source"] as? String ?? ""), "\(served)")
            #expect(server.requestCount(prefix: "/img/g.png") == 1)
            #expect(await daemon.stop() == 0)
        }
    }

    @Test("unknown forms and garbage expiry values are fetched as any URL: no expiry is guessed")
    func unknownAndGarbage() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try await withRunningServer { server in
            let daemon = try await DaemonProcess.start(in: scratch.path)
            defer { daemon.killIfRunning() }
            let urls = [
                "/img/u1.png?expires=1",  // no signature beside it: another meaning
                "/img/u2.png?Expires=1&Expires=2&Signature=s",  // ambiguous
                "/img/u3.png?X-Amz-Date=yesterday&X-Amz-Expires=60",
                "/img/u4.png?X-Amz-Date=20200230T000000Z&X-Amz-Expires=60",
                "/img/u5.png?sig=s&se=2020-13-45T99:99:99Z",
                "/img/u6.png?Expires=%FF%00&Signature=s",
                "/img/u7.png?Expires=" + String(repeating: "0", count: 300) + "1&Signature=s",
                "/img/u8.png?token_expires=1&X-Amz-Expires=1",
            ].map { server.url($0) }
            try daemon.drop("odd.txt", urls.joined(separator: "\n") + "\n")
            let list = try #require(await daemon.finishedList("odd.txt"))
            #expect(list["cached"] as? Int == urls.count, "\(list)")
            #expect(server.totalRequests == urls.count, "\(server.requestLog)")
            #expect(await daemon.stop() == 0)
        }
    }
}
