import Foundation
import ImgdCore
import ImgdTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// What one member can hold and stop of the daemon's queue, against the real daemon, a second
/// uid (``OtherUser``) and an origin that holds its answers at a gate: forced revalidations
/// (`refresh`) count against `max-queued` with duplicates merged; each member holds at most its
/// share (`max-queued-share`); a member's `cancel` of a URL stops only that member's requests.
@Suite(
    "The queue against a member: refresh is bounded, each uid has a share, cancel stops one's own",
    .enabled(if: OtherUser.available, "needs root and util-linux's setpriv to act as a second uid"),
    .timeLimit(.minutes(5)), .offThePool)
struct QueueShareTests {
    private static func held(_ daemon: DaemonProcess) async throws -> Int? {
        try await daemon.result(#"{"cmd":"status"}"#)["held"] as? Int
    }

    private static func errorCode(_ reply: [String: Any]) -> String? {
        (reply["error"] as? [String: Any])?["code"] as? String
    }

    private static func errorMessage(_ reply: [String: Any]) -> String {
        (reply["error"] as? [String: Any])?["message"] as? String ?? "\(reply)"
    }

    @Test("refresh holds requests like add: counted in status.held, duplicates merged, refused queue_full past max-queued (with add refused too); answered once the origin answers")
    func refreshIsBounded() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        // `gate` is left out of keys: `?gate=held` names the entry cached without it, and its
        // conditional request waits at the origin until the test opens the gate.
        try scratch.write("imgd.toml", "max-queued = 4\n[host.\"127.0.0.1\"]\nkey-ignore-query = [\"gate\"]\n")
        try await withRunningServer { server in
            let daemon = try await DaemonProcess.startShared(in: scratch, ["--config", scratch.path + "/imgd.toml"])
            defer { daemon.killIfRunning() }
            let plain = (0..<5).map { server.url("/fresh/q\($0).png?cc=max-age%3D3600") }
            for url in plain { _ = try await daemon.result(jsonLine(["cmd": "get", "url": url])) }
            let held = plain.map { $0 + "&gate=held" }

            // Three requests naming one key: one revalidation, one held request.
            let first = try await KeptConnection(daemon.socket)
            let merged = Task { try await first.callRaw(jsonLine(["cmd": "refresh", "urls": [held[4], held[4], plain[4] + "&gate=other"]])) }
            #expect(await eventually(timeout: .seconds(20)) { try await Self.held(daemon) == 1 }, "the refresh is not held as one request")
            let second = try await KeptConnection(daemon.socket)
            let three = Task { try await second.callRaw(jsonLine(["cmd": "refresh", "urls": Array(held[0..<3])])) }
            #expect(await eventually(timeout: .seconds(20)) { try await Self.held(daemon) == 4 })

            // Full: one more refresh, and an add, are refused; nothing of them is held.
            let over = try await daemon.call(jsonLine(["cmd": "refresh", "urls": [held[3]]]))
            #expect(Self.errorCode(over) == "queue_full", "\(over)")
            let add = try await daemon.call(jsonLine(["cmd": "add", "urls": [server.url("/img/new.png")]]))
            #expect(Self.errorCode(add) == "queue_full", "\(add)")
            #expect(try await Self.held(daemon) == 4)
            #expect(server.requestCount(prefix: "/fresh/q3.png") == 1, "the refused refresh asked the origin")

            server.openGate("held")
            let mergedReply = try KeptConnection.parseReply(try await merged.value)
            #expect((mergedReply["result"] as? [String: Any])?["revalidated"] as? Int == 1, "\(mergedReply)")
            let threeReply = try KeptConnection.parseReply(try await three.value)
            #expect((threeReply["result"] as? [String: Any])?["revalidated"] as? Int == 3, "\(threeReply)")
            #expect(server.requestCount(prefix: "/fresh/q4.png") == 2, "the duplicates asked once: \(server.requestLog)")
            #expect(await eventually(timeout: .seconds(10)) { try await Self.held(daemon) == 0 })
            let after = try await daemon.result(jsonLine(["cmd": "refresh", "urls": [plain[3]]]))
            #expect(after["revalidated"] as? Int == 1, "\(after)")
            #expect(await daemon.stop() == 0)
        }
    }

    @Test("a member holds at most its share (max-queued-share): its add, get without waiting and refresh are refused queue_full naming the share while others still queue; root has no share")
    func memberShare() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try await withRunningServer { server in
            // 8 requests in all; 25% of them, 2, for one member.
            let daemon = try await DaemonProcess.startShared(in: scratch, ["--max-queued", "8"])
            defer { daemon.killIfRunning() }
            let member = OtherUser.plain
            let mine = (0..<2).map { server.url("/img/mine\($0).png?gate=g") }
            let added = try await member.result(jsonLine(["cmd": "add", "urls": mine]), socket: daemon.socket)
            #expect(added["accepted"] as? Int == 2)

            let more = try await member.call(jsonLine(["cmd": "add", "urls": [server.url("/img/mine2.png?gate=g")]]), socket: daemon.socket)
            #expect(Self.errorCode(more) == "queue_full", "\(more)")
            #expect(Self.errorMessage(more).contains("uid \(OtherUser.uid) holds its share of the queue (max-queued-share 25%"), "\(more)")
            let pending = try await member.call(
                jsonLine(["cmd": "get", "url": server.url("/img/mine3.png?gate=g"), "wait": false]), socket: daemon.socket)
            #expect(Self.errorCode(pending) == "queue_full", "\(pending)")

            // Others still queue: root (no share) takes the rest of the queue.
            let roots = (0..<6).map { server.url("/img/root\($0).png?gate=g") }
            let rootAdded = try await daemon.result(jsonLine(["cmd": "add", "urls": roots]))
            #expect(rootAdded["accepted"] as? Int == 6)
            #expect(try await Self.held(daemon) == 8)

            server.openGate("g")
            #expect(await eventually(timeout: .seconds(20)) { try await Self.held(daemon) == 0 })
            let again = try await member.result(jsonLine(["cmd": "add", "urls": [server.url("/img/mine2.png")]]), socket: daemon.socket)
            #expect(again["accepted"] as? Int == 1, "the share is given back as requests are answered")
            #expect(await daemon.stop() == 0)
        }
    }

    @Test("a member's cancel of a URL stops the member's own requests, not another's list item or waiting get; root's stops every one")
    func cancelOwnOnly() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try await withRunningServer { server in
            let daemon = try await DaemonProcess.startShared(in: scratch)
            defer { daemon.killIfRunning() }
            let shared = server.url("/img/shared.png?gate=s")
            // Root's list and root's waiting get both wait on the shared URL.
            try daemon.drop("roots.txt", shared + "\n")
            #expect(await eventually(timeout: .seconds(20)) { try await daemon.list("roots.txt")?["state"] as? String == "active" })
            let waiting = try await KeptConnection(daemon.socket)
            let get = Task { try await waiting.callRaw(jsonLine(["cmd": "get", "url": shared])) }
            #expect(await server.waitForInFlight(atLeast: 1, timeout: .seconds(10)))

            // The member cancels the URL: nothing of theirs waits on it.
            let member = OtherUser.plain
            let refused = try await member.result(jsonLine(["cmd": "cancel", "url": shared]), socket: daemon.socket)
            #expect(refused["cancelled"] as? Int == 0, "\(refused)")
            // The member's own request for it is theirs to cancel; the download goes on for root.
            _ = try await member.result(jsonLine(["cmd": "add", "urls": [shared]]), socket: daemon.socket)
            let own = try await member.result(jsonLine(["cmd": "cancel", "url": shared]), socket: daemon.socket)
            #expect(own["cancelled"] as? Int == 1, "\(own)")

            server.openGate("s")
            let reply = try KeptConnection.parseReply(try await get.value)
            #expect((reply["result"] as? [String: Any])?["source"] as? String == "network", "root's get was cancelled: \(reply)")
            let list = try #require(await daemon.finishedList("roots.txt"))
            #expect(list["cached"] as? Int == 1, "root's list item was cancelled: \(list)")
            #expect(server.requestCount(prefix: "/img/shared.png") == 1)

            // Root's cancel stops everyone's.
            let other = server.url("/img/other.png?gate=o")
            _ = try await member.result(jsonLine(["cmd": "add", "urls": [other]]), socket: daemon.socket)
            #expect(await eventually(timeout: .seconds(10)) { try await Self.held(daemon) == 1 })
            let all = try await daemon.result(jsonLine(["cmd": "cancel", "url": other]))
            #expect(all["cancelled"] as? Int == 1)
            #expect(await eventually(timeout: .seconds(10)) { try await Self.held(daemon) == 0 })
            server.openGate("o")
            #expect(await daemon.stop() == 0)
        }
    }

    @Test("retry --list: one's own list allowed; another user's forbidden to a member (nothing asked again), allowed to root")
    func retryOwnListOnly() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try await withRunningServer { server in
            let daemon = try await DaemonProcess.startShared(in: scratch, ["--attempts", "1"])
            defer { daemon.killIfRunning() }
            try daemon.drop("roots.txt", server.url("/status/404?r") + "\n")
            try daemon.drop("mine.txt", server.url("/status/404?m") + "\n", owner: OtherUser.uid)
            _ = try #require(await daemon.finishedList("roots.txt"))
            _ = try #require(await daemon.finishedList("mine.txt"))
            let member = OtherUser.plain
            let refused = try await member.call(jsonLine(["cmd": "retry", "list": "roots.txt"]), socket: daemon.socket)
            #expect(Self.errorCode(refused) == "forbidden", "\(refused)")
            #expect(Self.errorMessage(refused).contains("list roots.txt was dropped by uid 0"), "\(refused)")
            #expect(server.requestCount("/status/404?r") == 1, "another user's list was asked again")

            let own = try await member.result(jsonLine(["cmd": "retry", "list": "mine.txt"]), socket: daemon.socket)
            #expect(own["requeued"] as? Int == 1, "\(own)")
            #expect(await eventually(timeout: .seconds(20)) { server.requestCount("/status/404?m") == 2 })
            let root = try await daemon.result(jsonLine(["cmd": "retry", "list": "roots.txt"]))
            #expect(root["requeued"] as? Int == 1, "\(root)")
            #expect(await eventually(timeout: .seconds(20)) { server.requestCount("/status/404?r") == 2 })
            #expect(await daemon.stop() == 0)
        }
    }
}
