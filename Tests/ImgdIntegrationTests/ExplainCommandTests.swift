import Foundation
import ImgdCore
import ImgdTestSupport
import Testing

/// `explain` (`imgctl explain`): why a URL is or is not cached, against the real imgd and the
/// test server, one URL per state; and what another member may learn through it.
@Suite("imgd: explain (the real binary)", .timeLimit(.minutes(5)), .offThePool)
struct ExplainCommandTests {
    /// `explain` of `url` (and `key`), as the test's root peer: the result, which must be ok.
    private func explain(_ daemon: DaemonProcess, _ url: String, key: String? = nil) async throws -> [String: Any] {
        var request: [String: Any] = ["cmd": "explain", "url": url]
        if let key { request["key"] = key }
        let line = String(decoding: try JSONSerialization.data(withJSONObject: request), as: UTF8.self)
        return try await daemon.result(line)
    }

    private static func line(_ object: [String: Any]) throws -> String {
        String(decoding: try JSONSerialization.data(withJSONObject: object), as: UTF8.self)
    }

    private static var nowMilliseconds: Int { Int(Date().timeIntervalSince1970 * 1000) }

    @Test("one URL per state: never seen, fresh, due, pinned, failed, refused by the address policy, a key without its signature")
    func states() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try await withRunningServer { server in
            try scratch.write("imgd.toml", """
                refresh = "respect-headers"
                [host."127.0.0.1:\(server.port)"]
                key-ignore-query = ["sig", "X-Amz-*"]
                """)
            let daemon = try await DaemonProcess.start(in: scratch.path, arguments: ["--config", scratch.path + "/imgd.toml"])
            defer { daemon.killIfRunning() }

            // Never seen.
            let unseen = try await explain(daemon, server.url("/img/never.png"))
            #expect(unseen["entry"] is NSNull && unseen["failure"] is NSNull && unseen["download"] is NSNull, "\(unseen)")
            #expect(unseen["memory"] as? Bool == false)
            #expect((unseen["outcomes"] as? [Any])?.isEmpty == true)
            #expect((unseen["address"] as? [String: Any])?["verdict"] as? String == "allowed")
            #expect(unseen["tier"] is NSNull && unseen["tier_bypass"] == nil)
            let host = try #require(unseen["host"] as? [String: Any])
            #expect(host["host"] as? String == "127.0.0.1:\(server.port)" && host["cap"] as? Int == 4 && host["running"] as? Int == 0)
            #expect(host["rule"] as? String == "127.0.0.1:\(server.port)" && host["headers"] as? Bool == false)

            // Cached and fresh (max-age an hour), in the memory tier after a second get.
            let freshURL = server.url("/fresh/f.png?cc=max-age%3D3600")
            let before = Self.nowMilliseconds
            _ = try await daemon.result(try Self.line(["cmd": "get", "url": freshURL]))
            _ = try await daemon.result(try Self.line(["cmd": "get", "url": freshURL]))
            let fresh = try await explain(daemon, freshURL)
            let entry = try #require(fresh["entry"] as? [String: Any], "\(fresh)")
            #expect(entry["format"] as? String == "png" && entry["due"] as? Bool == false && entry["pinned"] as? Bool == false)
            #expect((entry["sha256"] as? String)?.count == 64 && (entry["bytes"] as? Int ?? 0) > 0)
            let dueAt = try #require(entry["due_at"] as? Int)
            #expect(dueAt >= before + 3_590_000 && dueAt <= Self.nowMilliseconds + 3_600_000, "\(entry)")
            #expect(fresh["memory"] as? Bool == true)
            let fetched = try #require((fresh["outcomes"] as? [[String: Any]])?.first)
            #expect(fetched["kind"] as? String == "fetched" && fetched["cause"] as? String == "on_demand" && fetched["via"] as? String == "origin")
            #expect(fetched["bytes"] as? Int == entry["bytes"] as? Int && fetched["attempts"] as? Int == 1)
            // Looking changes nothing: the hit count and last use stay.
            let again = try #require(try await explain(daemon, freshURL)["entry"] as? [String: Any])
            #expect(again["hit_count"] as? Int == entry["hit_count"] as? Int && again["last_access"] as? Int == entry["last_access"] as? Int)

            // Due: no-cache makes it due at every use.
            let dueURL = server.url("/fresh/d.png?cc=no-cache")
            _ = try await daemon.result(try Self.line(["cmd": "get", "url": dueURL]))
            let due = try #require(try await explain(daemon, dueURL)["entry"] as? [String: Any])
            #expect(due["due"] as? Bool == true && due["due_at"] as? Int == 0 && due["refresh"] as? String == "respect-headers", "\(due)")

            // Pinned by an add.
            let pinnedURL = server.url("/img/pinned.png")
            _ = try await daemon.result(try Self.line(["cmd": "add", "urls": [pinnedURL], "pin": "1h"]))
            var pinned: [String: Any] = [:]
            #expect(await eventually(timeout: .seconds(20)) {
                pinned = (try? await self.explain(daemon, pinnedURL))?["entry"] as? [String: Any] ?? [:]
                return pinned["pinned"] as? Bool == true
            }, "\(pinned)")
            #expect((pinned["pinned_until"] as? Int ?? 0) > Self.nowMilliseconds + 3_500_000)

            // Failed: a 404, remembered for 10 minutes.
            let missingURL = server.url("/status/404")
            let failedAt = Self.nowMilliseconds
            let refused = try await daemon.call(try Self.line(["cmd": "get", "url": missingURL]))
            #expect(refused["ok"] as? Bool == false)
            let failed = try await explain(daemon, missingURL)
            let failure = try #require(failed["failure"] as? [String: Any], "\(failed)")
            #expect(failure["code"] as? String == "http_404")
            let until = try #require(failure["until"] as? Int)
            #expect(until >= failedAt + 590_000 && until <= Self.nowMilliseconds + 600_000, "\(failure)")
            let lastFailure = try #require((failed["outcomes"] as? [[String: Any]])?.last)
            #expect(lastFailure["kind"] as? String == "failed" && lastFailure["code"] as? String == "http_404")

            // Refused by the address policy: a literal link-local address, with the range.
            let metadata = try await explain(daemon, "http://169.254.169.254/latest/meta-data/")
            let address = try #require(metadata["address"] as? [String: Any])
            #expect(address["verdict"] as? String == "refused" && address["range"] as? String == "169.254.0.0/16", "\(address)")
            let named = try await explain(daemon, "http://images.example/a.png")
            #expect((named["address"] as? [String: Any])?["verdict"] as? String == "checked_at_connect")

            // key-ignore-query: the signature is left out of the key, and the keyed URL shows it.
            let signed = try await explain(daemon, server.url("/img/s.png?w=4&sig=abc&X-Amz-Date=1"))
            let key = try #require(signed["key"] as? [String: Any])
            #expect(key["from"] as? String == "url" && key["ignored"] as? [String] == ["sig", "X-Amz-Date"], "\(key)")
            #expect(key["ignore_query"] as? [String] == ["sig", "X-Amz-*"])
            #expect(key["keyed_url"] as? String == server.url("/img/s.png?w=4"))
            let unsigned = try await explain(daemon, server.url("/img/s.png?w=4"))
            #expect((unsigned["key"] as? [String: Any])?["key"] as? String == key["key"] as? String)

            // imgctl's human output.
            let human = try await BinaryRunner.imgctl(["explain", "--socket", daemon.socket, freshURL], in: scratch.path)
            #expect(human.status == 0, "\(human.stderr)")
            #expect(human.stdout.contains("cached: "), "\(human.stdout)")
            #expect(human.stdout.contains("memory tier: yes"), "\(human.stdout)")
            #expect(human.stdout.contains("fresh; due for revalidation in "), "\(human.stdout)")
            #expect(human.stdout.contains("address: allowed"), "\(human.stdout)")
            #expect(human.stdout.contains("last outcomes (oldest first):\n  "), "\(human.stdout)")
            let failedHuman = try await BinaryRunner.imgctl(["explain", "--socket", daemon.socket, missingURL], in: scratch.path)
            #expect(failedHuman.stdout.contains("failed: http_404: "), "\(failedHuman.stdout)")
            #expect(failedHuman.stdout.contains("cached: no"), "\(failedHuman.stdout)")
            #expect(await daemon.stop() == 0)
        }
    }

    @Test("queued behind a host at cap 1 whose one slot a slow URL holds; a host held by Retry-After")
    func queuedAndHeld() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try await withRunningServer { server in
            let other = try await TestHTTPServer.start()
            try scratch.write("imgd.toml", "[host.\"localhost:\(server.port)\"]\nmax-per-host = 1\n")
            let daemon = try await DaemonProcess.start(in: scratch.path, arguments: ["--config", scratch.path + "/imgd.toml"])
            defer { daemon.killIfRunning() }
            let slow = "http://localhost:\(server.port)/img/slow.png?gate=explain-slow"
            let behind = "http://localhost:\(server.port)/img/behind.png"
            _ = try await daemon.result(try Self.line(["cmd": "add", "urls": [slow]]))
            #expect(await server.waitForInFlight(atLeast: 1, timeout: .seconds(20)))
            _ = try await daemon.result(try Self.line(["cmd": "add", "urls": [behind]]))
            var queued: [String: Any] = [:]
            #expect(await eventually(timeout: .seconds(10)) {
                queued = (try? await self.explain(daemon, behind)) ?? [:]
                return (queued["download"] as? [String: Any])?["state"] as? String == "queued"
            }, "\(queued)")
            let host = try #require(queued["host"] as? [String: Any])
            #expect(host["host"] as? String == "localhost:\(server.port)")
            #expect(host["running"] as? Int == 1 && host["cap"] as? Int == 1 && host["queued"] as? Int == 1, "\(host)")
            #expect((queued["queue"] as? [String: Any])?["queued"] as? Int == 1)
            let download = try #require(queued["download"] as? [String: Any])
            #expect(download["priority"] as? String == "prefetch" && download["attempts"] as? Int == 0 && download["waiters"] as? Int == 1)
            let running = try #require(try await explain(daemon, slow)["download"] as? [String: Any])
            #expect(running["state"] as? String == "running" && running["via"] as? String == "origin", "\(running)")
            #expect(running["running_since"] is Int && running["bytes_received"] as? Int == 0)
            let human = try await BinaryRunner.imgctl(["explain", "--socket", daemon.socket, behind], in: scratch.path)
            #expect(human.stdout.contains("download: queued (prefetch, attempt 0)\n  behind localhost:\(server.port): 1 of 1 slots, 1 queued"), "\(human.stdout)")
            server.openGate("explain-slow")
            #expect(await eventually(timeout: .seconds(20)) {
                ((try? await self.explain(daemon, behind))?["entry"] as? [String: Any]) != nil
            })
            // The host's queue is empty again, its counter back to 0.
            #expect(((try await explain(daemon, behind))["host"] as? [String: Any])?["queued"] as? Int == 0)

            // Held by a Retry-After: 30 seconds from the 503.
            let held = other.url("/flaky/held.png?fail=100&status=503&retry_after=30")
            let asked = Self.nowMilliseconds
            _ = try await daemon.result(try Self.line(["cmd": "add", "urls": [held]]))
            var waiting: [String: Any] = [:]
            #expect(await eventually(timeout: .seconds(20)) {
                waiting = (try? await self.explain(daemon, held)) ?? [:]
                return (waiting["host"] as? [String: Any])?["held_by"] as? String == "retry_after"
            }, "\(waiting)")
            let heldHost = try #require(waiting["host"] as? [String: Any])
            let heldUntil = try #require(heldHost["held_until"] as? Int)
            #expect(heldUntil >= asked + 29_000 && heldUntil <= Self.nowMilliseconds + 30_000, "\(heldHost)")
            let retrying = try #require(waiting["download"] as? [String: Any])
            #expect(retrying["state"] as? String == "waiting_retry" && retrying["attempts"] as? Int == 1, "\(retrying)")
            #expect((retrying["retry_at"] as? Int ?? 0) >= asked + 29_000)
            let heldHuman = try await BinaryRunner.imgctl(["explain", "--socket", daemon.socket, held], in: scratch.path)
            #expect(heldHuman.stdout.contains("  held by a Retry-After until in "), "\(heldHuman.stdout)")
            #expect(await daemon.stop() == 0)
            try await other.shutdown()
        }
    }

    @Test("more than 8 outcomes of one key: the last 8 are kept, in order")
    func lastEightOutcomes() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try await withRunningServer { server in
            let daemon = try await DaemonProcess.start(in: scratch.path)
            defer { daemon.killIfRunning() }
            // Three 404s (a get, then retries, each forgetting the last), then a body; then evicted
            // and fetched again, six times: ten outcomes.
            let url = server.url("/flaky/ring.png?fail=3&status=404")
            func outcomes() async -> [[String: Any]] {
                ((try? await self.explain(daemon, url))?["outcomes"] as? [[String: Any]]) ?? []
            }
            _ = try await daemon.call(try Self.line(["cmd": "get", "url": url]))
            for round in 2...4 {
                _ = try await daemon.result(try Self.line(["cmd": "retry", "url": url]))
                #expect(await eventually(timeout: .seconds(20)) { await outcomes().count == round })
            }
            for round in 5...10 {
                _ = try await daemon.result(try Self.line(["cmd": "evict", "urls": [url]]))
                _ = try await daemon.result(try Self.line(["cmd": "get", "url": url]))
                #expect(await eventually(timeout: .seconds(20)) { await outcomes().count == min(round, 8) || round > 8 })
            }
            let kept = await outcomes()
            #expect(kept.count == 8)
            #expect(kept.map { $0["kind"] as? String ?? "" } == ["failed"] + Array(repeating: "fetched", count: 7), "\(kept)")
            #expect(kept.first?["code"] as? String == "http_404")
            // The first get was on demand, the retries prefetches, the gets after each evict on demand.
            #expect(kept.map { $0["cause"] as? String ?? "" } == ["prefetch", "prefetch"] + Array(repeating: "on_demand", count: 6))
            let times = kept.map { $0["at"] as? Int ?? 0 }
            #expect(times == times.sorted(), "\(times)")
            #expect(server.requestCount("/flaky/ring.png?fail=3&status=404") == 10)
            #expect(await daemon.stop() == 0)
        }
    }

    @Test("the tier: its URL for a request, none for a host with headers (and the headers stay secret)")
    func tierRoute() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try scratch.write("imgd.toml", """
            tier = "http://127.0.0.1:9/fleet"
            [host."localhost:8080"]
            headers = { X-Api-Key = "t0p-s3cr3t-v4lue" }
            headers-over-http = true
            """)
        let daemon = try await DaemonProcess.start(in: scratch.path, arguments: ["--config", scratch.path + "/imgd.toml"])
        defer { daemon.killIfRunning() }
        let through = try await explain(daemon, "http://origin.example:8080/a/b.png?x=1")
        #expect((through["tier"] as? [String: Any])?["url"] as? String == "http://127.0.0.1:9/fleet/http/origin.example:8080/a/b.png?x=1", "\(through)")
        let direct = try await explain(daemon, "http://localhost:8080/a/b.png")
        #expect(direct["tier"] is NSNull && direct["tier_bypass"] as? String == "host_headers", "\(direct)")
        #expect((direct["host"] as? [String: Any])?["headers"] as? Bool == true)
        let raw = try await daemon.call(try Self.line(["cmd": "explain", "url": "http://localhost:8080/a/b.png"]))
        #expect(!"\(raw)".contains("s3cr3t") && !"\(raw)".contains("X-Api-Key"), "\(raw)")
        let human = try await BinaryRunner.imgctl(["explain", "--socket", daemon.socket, "http://localhost:8080/a/b.png"], in: scratch.path)
        #expect(human.stdout.contains("tier: not used: the host's requests carry configured headers"), "\(human.stdout)")
        #expect(await daemon.stop() == 0)
    }

    @Test(
        "another member learns nothing new: a chosen key is in their own namespace; no other member's signature, no headers, no waiters",
        .enabled(if: OtherUser.available, "needs root and setpriv"))
    func isolation() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try await withRunningServer { server in
            try scratch.write("imgd.toml", """
                [host."127.0.0.1:\(server.port)"]
                key-ignore-query = ["sig"]
                headers = { X-Api-Key = "m3mb3r-s3cr3t" }
                headers-over-http = true
                """)
            chmod(scratch.path, 0o755)
            let socket = scratch.path + "/imgd.sock"
            let daemon = try await DaemonProcess.start(
                in: scratch.path, arguments: ["--config", scratch.path + "/imgd.toml", "--socket", socket], socket: socket)
            defer { daemon.killIfRunning() }
            try OtherUser.share(socket)
            let member = OtherUser.plain
            // Root caches under its chosen key, and a signed URL with its own signature.
            let chosenURL = server.url("/img/chosen.png")
            _ = try await daemon.result(try Self.line(["cmd": "get", "url": chosenURL, "key": "shared-name"]))
            let signed = server.url("/img/signed.png?sig=R00T-S1GNATURE")
            _ = try await daemon.result(try Self.line(["cmd": "get", "url": signed]))
            let mine = try await explain(daemon, chosenURL, key: "shared-name")
            #expect(mine["entry"] is [String: Any], "\(mine)")
            #expect((mine["key"] as? [String: Any])?["namespace"] as? String == "uid 0")

            // The member's "shared-name" is their own key: nothing cached there.
            let theirs = try await member.call(try Self.line(["cmd": "explain", "url": chosenURL, "key": "shared-name"]), socket: daemon.socket)
            let result = try #require(theirs["result"] as? [String: Any], "\(theirs)")
            #expect(result["entry"] is NSNull, "\(result)")
            let key = try #require(result["key"] as? [String: Any])
            #expect(key["namespace"] as? String == "uid \(OtherUser.uid)" && key["key"] as? String != (mine["key"] as? [String: Any])?["key"] as? String)
            #expect((result["outcomes"] as? [Any])?.isEmpty == true)

            // The same image under another signature: cached, but root's signature is nowhere.
            let other = try await member.call(
                try Self.line(["cmd": "explain", "url": server.url("/img/signed.png?sig=m3mber")]), socket: daemon.socket)
            #expect(((other["result"] as? [String: Any])?["entry"]) is [String: Any], "\(other)")
            #expect(!"\(other)".contains("R00T-S1GNATURE") && !"\(other)".contains("m3mb3r-s3cr3t") && !"\(other)".contains("X-Api-Key"), "\(other)")

            // A download under way: the member sees its state, not who waits for it.
            let gated = server.url("/img/gated.png?gate=explain-member")
            _ = try await daemon.result(try Self.line(["cmd": "add", "urls": [gated]]))
            #expect(await server.waitForInFlight(atLeast: 1, timeout: .seconds(20)))
            let watching = try await member.call(try Self.line(["cmd": "explain", "url": gated]), socket: daemon.socket)
            let download = try #require((watching["result"] as? [String: Any])?["download"] as? [String: Any], "\(watching)")
            #expect(download["state"] as? String == "running" && download["waiters"] == nil, "\(download)")
            let rootView = try #require(try await explain(daemon, gated)["download"] as? [String: Any])
            #expect(rootView["waiters"] as? Int == 1)
            server.openGate("explain-member")

            // imgctl as the member, with --key.
            let human = try await member.imgctl(["explain", chosenURL, "--key", "shared-name"], socket: daemon.socket)
            #expect(human.status == 0, "\(human.stderr)")
            #expect(human.stdout.contains("namespace uid \(OtherUser.uid)") && human.stdout.contains("cached: no"), "\(human.stdout)")
            #expect(await daemon.stop() == 0)
        }
    }
}
