import ImgdProtocol
import ImgdTestSupport
import Testing

@testable import ImgctlCLI

/// The transport against a scripted server: exact request lines, ids, events between replies,
/// lines split over writes, errors and closed connections.
@Suite("Control client", .timeLimit(.minutes(5)), .offThePool)
struct ControlClientTests {
    typealias Server = ScriptedControlServer

    @Test("request lines are compact JSON with sorted keys and increasing integer ids")
    func requestLines() throws {
        let accepted = RecordedReply.value("add", replacing: ["accepted": .int(2), "rejected": .array([])]).jsonText
        let server = try Server { request in [.line(Server.success(request.id, accepted))] }
        defer { server.stop() }
        let run = ImgctlRun([
            "add", "--socket", server.path, "--priority", "high", "--pin", "24h", "http://a.test/x.png", "http://b.test/y \"q\".png",
        ])
        #expect(run.status == 0)
        #expect(run.stdout.text == "queued 2 URLs\n")
        #expect(
            server.received.map(\.raw) == [
                #"{"cmd":"add","id":1,"pin":"24h","priority":"high","urls":["http://a.test/x.png","http://b.test/y \"q\".png"]}"#
            ])

        let evict = ImgctlRun(["evict", "--socket", server.path, "http://a.test/x.png"])
        #expect(evict.status == 0)
        let get = ImgctlRun(["get", "--socket", server.path, "--no-fetch", "http://a.test/x.png"])
        #expect(get.status == 1)  // the script answered without a path
        let retry = ImgctlRun(["retry", "--socket", server.path, "--list", "a.txt"])
        #expect(retry.status == 0)
        let purge = ImgctlRun(["purge", "--socket", server.path, "--memory"])
        #expect(purge.status == 0)
        #expect(
            server.received.dropFirst().map(\.raw) == [
                #"{"cmd":"evict","id":1,"urls":["http://a.test/x.png"]}"#,
                #"{"cmd":"get","fetch":false,"id":1,"url":"http://a.test/x.png"}"#,
                #"{"cmd":"retry","id":1,"list":"a.txt"}"#,
                #"{"cmd":"purge","id":1,"tier":"memory"}"#,
            ])
    }

    @Test("replies are matched by id; events and stale replies in between are skipped (events kept)")
    func matchingByID() throws {
        let server = try Server { request in
            [
                .drip(Server.event("fetched", seq: request.id * 10, #"{"url":"http://a.test/\#(request.id).png"}"#)),
                .line(Server.success(request.id + 100, #"{"stale":true}"#)),
                .line(""),  // a blank line: ignored
                .drip(Server.success(request.id, #"{"pong":true,"n":\#(request.id)}"#)),
            ]
        }
        defer { server.stop() }
        let client = try ControlClient(connectingTo: server.path)
        let first = try client.request("ping")
        #expect(first.result["n"]?.intValue == 1)
        #expect(first.raw == #"{"id":1,"ok":true,"result":{"pong":true,"n":1}}"#)
        let second = try client.request("hello", ["x": .bool(true)])
        #expect(second.result["n"]?.intValue == 2)
        #expect(server.received.map(\.id) == [1, 2])
        // The events read while waiting come out in order.
        guard case .event(let one) = try client.nextEvent(timeout: .seconds(5)),
            case .event(let two) = try client.nextEvent(timeout: .seconds(5))
        else {
            Issue.record("expected two kept events")
            return
        }
        #expect([one.seq, two.seq] == [10, 20])
        #expect(two.data["url"]?.stringValue == "http://a.test/2.png")
        // Nothing more is coming: the wait times out.
        guard case .timedOut = try client.nextEvent(timeout: .milliseconds(20)) else {
            Issue.record("expected a timeout")
            return
        }
        client.close()
    }

    @Test("events kept while a reply is awaited are capped: the oldest go")
    func keptEventsCapped() throws {
        let server = try Server { request in
            [.line((1...25).map { Server.event("fetched", seq: $0, "{}") }.joined(separator: "\n")),
             .line(Server.success(request.id, "{}"))]
        }
        defer { server.stop() }
        let client = try ControlClient(connectingTo: server.path, keptEventLimit: 10)
        _ = try client.request("ping")
        var seqs: [Int] = []
        while case .event(let event) = try client.nextEvent(timeout: .milliseconds(20)) { seqs.append(event.seq) }
        #expect(seqs == Array(16...25))
        client.close()
    }

    @Test("a long reply split across many writes arrives whole")
    func splitLines() throws {
        let long = String(repeating: "abcdefgh", count: 4096)  // 32 KiB, one byte per write
        let reply = RecordedReply.value("get", replacing: ["path": .string("/c/" + long)]).jsonText
        let server = try Server { request in [.drip(Server.success(request.id, reply))] }
        defer { server.stop() }
        let run = ImgctlRun(["get", "--socket", server.path, "http://a.test/x.png"])
        #expect(run.status == 0)
        #expect(run.stdout.text == "/c/\(long)\n")
    }

    @Test("the daemon's error: exit 1, `imgctl: code: message` on stderr; with --json the raw line on stdout")
    func daemonError() throws {
        let server = try Server { request in [.line(Server.failure(request.id, "not_found", "not cached"))] }
        defer { server.stop() }
        let run = ImgctlRun(["get", "--socket", server.path, "--no-fetch", "http://a.test/x.png"])
        #expect(run.status == 1)
        #expect(run.stderr.text == "imgctl: not_found: not cached\n")
        #expect(run.stdout.text.isEmpty)
        let json = ImgctlRun(["cancel", "--socket", server.path, "--json", "--list", "nope.txt"])
        #expect(json.status == 1)
        #expect(json.stdout.text == Server.failure(1, "not_found", "not cached") + "\n")
        #expect(json.stderr.text == "imgctl: not_found: not cached\n")
    }

    @Test("an error without an id (busy) is the reply; a connection closed before a reply is exit 3")
    func busyAndClosed() throws {
        let busy = try Server(greeting: [
            .line(#"{"error":{"code":"busy","message":"too many connections"},"id":null,"ok":false}"#), .close,
        ]) { _ in [] }
        defer { busy.stop() }
        let run = ImgctlRun(["status", "--socket", busy.path])
        #expect(run.status == 1)
        #expect(run.stderr.text == "imgctl: busy: too many connections\n")

        let closing = try Server { _ in [.bytes(Array(#"{"id":1,"ok":tr"#.utf8)), .close] }
        defer { closing.stop() }
        let closed = ImgctlRun(["status", "--socket", closing.path])
        #expect(closed.status == 3)
        #expect(closed.stderr.text == "imgctl: imgd closed the connection at \(closing.path)\n")
    }

    @Test("a reply line over the limit (1 MiB + slack) is refused, not buffered forever")
    func lineTooLong() throws {
        let huge = [UInt8](repeating: UInt8(ascii: "a"), count: ControlClient.maximumLineLength + 10)
        let server = try Server { _ in [.bytes(Array(#"{"id":1,"ok":true,"result":{"path":""#.utf8) + huge)] }
        defer { server.stop() }
        let run = ImgctlRun(["get", "--socket", server.path, "http://a.test/x.png"])
        #expect(run.status == 1)
        #expect(run.stderr.text.contains("bad reply from imgd: a line longer than"))
    }

    @Test("not JSON: exit 1, bad reply")
    func notJSON() throws {
        let server = try Server { _ in [.line("hello there")] }
        defer { server.stop() }
        let run = ImgctlRun(["stats", "--socket", server.path])
        #expect(run.status == 1)
        #expect(run.stderr.text == "imgctl: bad reply from imgd: not a JSON object: hello there\n")
    }

    @Test("watch: subscribes, prints each event as `seq event key=value…`, exit 3 when the daemon closes")
    func watch() throws {
        // The daemon's own events: a URL and a message with spaces, numbers, a format.
        let fetched = RecordedReply.value("event-fetched")
        let failed = RecordedReply.value("event-failed")
        let server = try Server { request in
            [
                .line(Server.success(request.id, RecordedReply.text("subscribe"))),
                .line(Server.event("fetched", seq: 7, fetched.jsonText)),
                .drip(Server.event("failed", seq: 9, failed.jsonText)),
                .close,
            ]
        }
        defer { server.stop() }
        let run = ImgctlRun(["watch", "--socket", server.path, "--events", "fetched,failed"])
        #expect(run.status == 3)
        #expect(server.received.map(\.raw) == [#"{"cmd":"subscribe","events":["fetched","failed"],"id":1}"#])
        let bytes = try #require(fetched["bytes"]?.intValue)
        let format = try #require(fetched["format"]?.stringValue)
        let url = try #require(fetched["url"]?.stringValue)
        let failedURL = try #require(failed["url"]?.stringValue)
        let code = try #require(failed["code"]?.stringValue)
        let message = try #require(failed["message"]?.stringValue)
        #expect(message.contains(" "), "the recorded message has spaces, so it is quoted")
        #expect(
            run.stdout.lines == [
                "7 fetched bytes=\(bytes) format=\(format) url=\(url)",
                "9 failed code=\(code) message=\(JSONValue.string(message).jsonText) url=\(failedURL)",
            ])
        let json = ImgctlRun(["watch", "--socket", server.path, "--json"])
        #expect(json.stdout.lines.count == 3)  // the subscribe reply, then two events, as sent
        #expect(json.stdout.lines[1] == Server.event("fetched", seq: 7, fetched.jsonText))
    }

    @Test("status and lists in the human format")
    func humanFormats() throws {
        let status = RecordedReply.value(
            "status",
            replacing: [
                "version": .string("0.2.0"), "pid": .int(42), "uptime_s": .double(3725), "queued": .int(3), "in_flight": .int(2),
                "held": .int(1_204), "held_bytes": .int(98_304), "lists_active": .int(1), "lists_waiting": .int(2), "cache.bytes": .int(1_610_612_736), "cache.entries": .int(3400),
                "cache.limit": .int(10_737_418_240), "cache.pinned_bytes": .int(12_582_912), "cache.path": .string("/var/cache/imgd"),
                "memory.bytes": .int(67_108_864), "memory.entries": .int(120), "memory.limit": .int(268_435_456),
                "memory.pressure_source": .string("psi-poll"), "memory.pressure_path": .string("/proc/pressure/memory"),
                "pressure_events": .int(0), "spool": .string("/var/spool/imgd"),
            ])
        // claimed_at as the daemon sends it: milliseconds since 1970, here 62 s before "now".
        let claimedAt = try #require(RecordedReply.value("lists")["lists"]?.arrayValue?.first?["claimed_at"]?.intValue)
        let list = RecordedReply.list(
            name: "a.txt", state: "active", total: 1000, cached: 40, alreadyCached: 5, failed: 1, pending: 954, bytes: 1536)
        let server = try Server { request in
            switch request.command {
            case "status": return [.line(Server.success(request.id, status.jsonText))]
            default: return [.line(Server.success(request.id, RecordedReply.lists([list])))]
            }
        }
        defer { server.stop() }
        let run = ImgctlRun(["status", "--socket", server.path])
        #expect(run.status == 0)
        #expect(
            run.stdout.lines == [
                "imgd 0.2.0 (pid 42), up 1h 2m", "queued: 3", "in flight: 2", "lists active: 1", "lists waiting: 2",
                "requests held: 1,204 (96 KiB of URLs)", "disk cache: 1.5 GiB in 3,400 entries, limit 10 GiB, 12 MiB pinned", "cache folder: /var/cache/imgd",
                "memory tier: 64 MiB in 120 entries, limit 256 MiB", "memory pressure: psi-poll (/proc/pressure/memory)",
                "memory pressure events: 0", "spool: /var/spool/imgd",
                "degraded: no", "ready: yes (no ready-lists)", "window: none (max-parallel 8)", "courtesy: off (courtesy = false)",
            ])
        let lists = ImgctlRun(["lists", "--socket", server.path]) { context in
            context.now = { Double(claimedAt) / 1000 + 62 }
        }
        #expect(lists.status == 0)
        #expect(
            lists.stdout.lines == [
                "NAME   STATE   TOTAL  CACHED  ALREADY  FAILED  PENDING  SIZE     CLAIMED",
                "a.txt  active  1,000  40      5        1       954      1.5 KiB  1m 2s ago",
            ])
    }
}
