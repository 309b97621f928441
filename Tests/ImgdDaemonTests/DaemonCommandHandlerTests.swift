import Logging
import Foundation
import ImgdCore
@testable import ImgdDaemon
import ImgdProtocol
import ImgdStore
import ImgdTestSupport
import NIOCore
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The daemon's command handler (``DaemonCommandHandler``) on the daemon's real services, started
/// in this process on a scratch folder (``DaemonServices/start(config:options:log:)``), fetching
/// from the real test HTTP server: the shape of each command's reply, and the error code of each
/// kind of bad argument. The socket in front of it has tests of its own (`Control*Tests`).
@Suite("Command handler: each command's reply, and its error codes", .timeLimit(.minutes(5)), .offThePool)
struct DaemonCommandHandlerTests {
    /// The services, a handler attached to them, and the server they fetch from.
    struct Fixture {
        let services: DaemonServices
        let handler: DaemonCommandHandler
        let server: TestHTTPServer
        let folder: String

        static let root = ControlPeer(pid: 1, uid: 0, gid: 0)
        static let stranger = ControlPeer(pid: 2, uid: 65534, gid: 65534)

        /// Runs `command` as `peer` through the path the server takes: at once when it can be, else `handle`.
        func run(
            _ command: String, _ arguments: [String: JSONValue] = [:], as peer: ControlPeer = Fixture.root
        ) async -> Result<JSONValue, ControlError> {
            let request = ControlRequest(id: 1, command: command, arguments: arguments, peer: peer)
            if let answer = handler.answerAtOnce(request) { return answer }
            return await handler.handle(request)
        }

        /// The reply's object (failing the test on an error reply).
        func object(
            _ command: String, _ arguments: [String: JSONValue] = [:], as peer: ControlPeer = Fixture.root,
            sourceLocation: SourceLocation = #_sourceLocation
        ) async throws -> [String: JSONValue] {
            let reply = await run(command, arguments, as: peer)
            switch reply {
            case .success(let value):
                return try #require(value.objectValue, "not an object: \(value)", sourceLocation: sourceLocation)
            case .failure(let error):
                Issue.record("\(command) failed: \(error)", sourceLocation: sourceLocation)
                throw error
            }
        }

        /// The error code of the reply (nil, and a recorded issue, when it succeeded).
        func code(
            _ command: String, _ arguments: [String: JSONValue] = [:], as peer: ControlPeer = Fixture.root,
            sourceLocation: SourceLocation = #_sourceLocation
        ) async -> ControlError? {
            switch await run(command, arguments, as: peer) {
            case .success(let value):
                Issue.record("\(command) \(arguments) succeeded: \(value)", sourceLocation: sourceLocation)
                return nil
            case .failure(let error):
                return error
            }
        }

        func log() -> String {
            (try? String(contentsOfFile: folder + "/imgd.log", encoding: .utf8)) ?? ""
        }
    }

    static func withFixture(_ body: (Fixture) async throws -> Void) async throws {
        let server = try await TestHTTPServer.start()
        let folder = try ListStoreOwnerTests.scratch()
        let config = DaemonConfig(
            spool: folder + "/spool", cache: folder + "/cache", state: folder + "/state", socket: folder + "/imgd.sock")
        // The pressure watch off: this process is not the daemon, and other suites watch the kernel's file.
        let options = DaemonOptions(configFile: nil, flags: [], environment: ["MEMORY_PRESSURE_WATCH": "/dev/null"])
        let logger = JournalLogHandler.logger(
            environment: [:], descriptor: open(folder + "/imgd.log", O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600))
        let services: DaemonServices
        do {
            services = try await DaemonServices.start(config: config, options: options, logger: logger)
        } catch {
            try await server.shutdown()
            throw error
        }
        let group = services.serviceGroup(signals: nil)
        let running = Task { try await group.run() }
        let handler = DaemonCommandHandler()
        handler.attach(services)
        let fixture = Fixture(services: services, handler: handler, server: server, folder: folder)
        var failure: (any Error)?
        do {
            try await body(fixture)
        } catch {
            failure = error
        }
        await group.triggerGracefulShutdown()
        try await running.value
        try await server.shutdown()
        try? FileManager.default.removeItem(atPath: folder)
        if let failure { throw failure }
    }

    static func keys(_ object: [String: JSONValue]) -> Set<String> { Set(object.keys) }

    @Test("a handler whose services are not attached yet answers shutting_down, and nothing at once")
    func notAttached() async {
        let handler = DaemonCommandHandler()
        let request = ControlRequest(command: "ping")
        #expect(handler.answerAtOnce(request) == nil)
        guard case .failure(let error) = await handler.handle(request) else {
            Issue.record("answered without services")
            return
        }
        #expect(error == .shuttingDown && error.code == "shutting_down")
    }

    @Test("hello, ping, status and stats: the members Protocol.md lists, of the types it gives")
    func readingCommands() async throws {
        try await Self.withFixture { fixture in
            let hello = try await fixture.object("hello")
            #expect(hello["protocol"] == 1 && hello["version"] == .string(ImgdVersion.string))
            #expect(hello["features"] == JSONValue(["subscribe", "pin", "data", "explain", "ready", "metrics", "fd", "mirrors", "warm-set", "deadlines"]))
            #expect(try await fixture.object("ping") == ["pong": true])
            let atOnce = fixture.handler.answerAtOnce(ControlRequest(command: "ping"))
            #expect(atOnce == Result<JSONValue, ControlError>.success(["pong": true]), "ping is answered at once")

            let status = try await fixture.object("status")
            #expect(Self.keys(status) == [
                "version", "pid", "uptime_s", "queued", "in_flight", "held", "held_bytes", "lists_active", "lists_waiting", "spool", "cache", "memory",
                "pressure_events", "max_rate", "max_rate_applies_to", "throttled_now", "degraded", "ready", "window", "courtesy", "users",
            ])
            // No window tables: none in force, none coming, the setting's caps.
            #expect(status["window"] == ["name": .null, "current": .null, "next": .null, "max_parallel": 8, "max_rate": .null])
            // The courtesy loop runs here on the machine's real pressure: its cap is at most max-parallel.
            let courtesyLimit = status["courtesy"]?["limit"]?.intValue ?? 0, courtesyCap = status["courtesy"]?["cap"]?.intValue ?? 0
            #expect(courtesyCap == 8 && (1...courtesyCap).contains(courtesyLimit) && status["courtesy"]?["threshold"] == 20.0, "\(status)")
            // Quotas per user: an empty cache charges nobody.
            #expect(status["users"] == [])
            // No ready-lists: ready at start, nothing read.
            #expect(status["ready"] == [
                "ready": true, "fraction": 1.0, "cached": 0, "failed": 0, "total": 0, "needed": 0, "lists": [], "missing": [],
            ])
            #expect(status["max_rate"] == .null && status["max_rate_applies_to"] == "prefetch" && status["throttled_now"] == 0)
            #expect(status["pid"]?.intValue == Int(getpid()))
            #expect(status["spool"] == .string(fixture.folder + "/spool"))
            #expect(status["queued"]?.intValue == 0 && status["in_flight"]?.intValue == 0 && status["lists_active"]?.intValue == 0)
            #expect(status["held"]?.intValue == 0 && status["held_bytes"]?.intValue == 0)
            let cache = try #require(status["cache"]?.objectValue)
            #expect(Self.keys(cache) == ["bytes", "entries", "limit", "pinned_bytes", "path"])
            #expect(cache["limit"]?.intValue == 1 << 30 && cache["path"] == .string(fixture.folder + "/cache"))
            let memory = try #require(status["memory"]?.objectValue)
            #expect(Self.keys(memory) == ["bytes", "entries", "limit", "pressure_source", "pressure_path"])
            #expect(memory["pressure_source"] == "off" && memory["pressure_path"] == .null)
            #expect(status["degraded"]?.arrayValue != nil)

            let stats = try await fixture.object("stats")
            #expect(Self.keys(stats) == [
                "downloads", "download_bytes", "download_failures", "retries", "failures", "coalesced", "revalidated", "cancelled",
                "preempted", "paced_out", "throttled", "tier_fallbacks", "memory", "disk", "gets", "pressure_events", "events_dropped",
            ])
            #expect(Self.keys(try #require(stats["memory"]?.objectValue)) == ["hits", "misses", "purges"])
            #expect(Self.keys(try #require(stats["disk"]?.objectValue)) == ["hits", "misses", "evicted", "expired"])
            #expect(stats["failures"] == .object([:]) && stats["downloads"]?.intValue == 0)
        }
    }

    @Test("get's reply at once (a memory hit, a bad argument, a miss) is the line of answerAtOnce's answer, byte for byte")
    func replyAtOnceLine() async throws {
        try await Self.withFixture { fixture in
            let url = JSONValue.string(fixture.server.url("/img/at-once.png?w=9&h=7"))
            _ = try await fixture.object("get", ["url": url])
            #expect(await eventually(timeout: .seconds(10)) {
                fixture.handler.answerAtOnce(ControlRequest(id: 1, command: "get", arguments: ["url": url])) != nil
            })
            let cases: [(JSONValue, [String: JSONValue])] = [
                (1, ["url": url]), ("x\"y", ["url": url, "data": true]), (.null, ["url": url, "fetch": false]),
                (2, ["url": 7]), (3, ["url": url, "data": "yes"]),
            ]
            for (id, arguments) in cases {
                let request = ControlRequest(id: id, command: "get", arguments: arguments, peer: Fixture.root)
                let line = try #require(fixture.handler.replyAtOnce(request), "\(arguments)")
                let answer = try #require(fixture.handler.answerAtOnce(request))
                #expect(String(buffer: line) == String(buffer: ControlLine.reply(id: id, answer)), "\(arguments)")
            }
            let missing = ControlRequest(id: 4, command: "get", arguments: ["url": .string(fixture.server.url("/img/none.png"))])
            #expect(fixture.handler.replyAtOnce(missing) == nil && fixture.handler.answerAtOnce(missing) == nil)
            let ping = ControlRequest(id: 5, command: "ping")
            #expect(fixture.handler.replyAtOnce(ping).map { String(buffer: $0) } == #"{"id":5,"ok":true,"result":{"pong":true}}"# + "\n")
        }
    }

    @Test("get: fetched from the network, then from a tier; data: true carries the bytes; fetch: false and wait: false; counted in stats")
    func get() async throws {
        try await Self.withFixture { fixture in
            let target = "/img/handler.png?w=12&h=10"
            let url = JSONValue.string(fixture.server.url(target))
            let body = try #require(TestHTTPServer.body(for: target))
            let fetched = try await fixture.object("get", ["url": url])
            #expect(Self.keys(fetched) == ["path", "bytes", "sha256", "format", "width", "height", "source"])
            #expect(fetched["source"] == "network" && fetched["bytes"]?.intValue == body.count)
            #expect(fetched["format"] == "png" && fetched["width"] == 12 && fetched["height"] == 10)
            let path = try #require(fetched["path"]?.stringValue)
            #expect(FileManager.default.contents(atPath: path) == Data(body))

            let again = try await fixture.object("get", ["url": url])
            #expect(again["source"] == "memory" || again["source"] == "disk", "\(again)")
            #expect(again["sha256"] == fetched["sha256"])
            let inline = try await fixture.object("get", ["url": url, "data": true])
            #expect(inline["data"]?.stringValue.flatMap { Data(base64Encoded: $0) } == Data(body))
            #expect(fixture.server.requestCount(target) == 1)

            let missing = JSONValue.string(fixture.server.url("/img/not-yet.png"))
            let notFound = await fixture.code("get", ["url": missing, "fetch": false])
            #expect(notFound?.code == "not_found")
            #expect(try await fixture.object("get", ["url": missing, "wait": false]) == ["pending": true])
            #expect(await eventually(timeout: .seconds(30)) { fixture.server.requestCount("/img/not-yet.png") == 1 })

            let failed = await fixture.code("get", ["url": .string(fixture.server.url("/status/404"))])
            #expect(failed?.code == "http_404", "a download's error code is passed through: \(String(describing: failed))")
            let stats = try await fixture.object("stats")
            #expect(stats["gets"]?.intValue == 6, "\(stats)")
            #expect((stats["failures"]?.objectValue)?["http_404"] == 1)
        }
    }

    @Test("a get asks the index once: a network miss (the reply is made from the row the downloader recorded) and a disk hit with data; its arguments are parsed at once and carried to the task")
    func getAsksTheIndexOnce() async throws {
        try await Self.withFixture { fixture in
            let disk = fixture.services.disk
            let target = "/img/once.png?w=9&h=7"
            let url = JSONValue.string(fixture.server.url(target))
            let request = ControlRequest(id: 1, command: "get", arguments: ["url": url], peer: Fixture.root)
            // The way the server runs it: at once (a memory miss), then in a task.
            #expect(fixture.handler.replyAtOnce(request) == nil)
            let carried = try #require(request.prepared.value(as: DaemonCommands.GetArguments.self))
            #expect(carried.image.url.normalized == url.stringValue && !carried.data)
            var before = disk.lookups.load(ordering: .relaxed)
            let fetched = try await fixture.handler.handle(request).get().objectValue ?? [:]
            #expect(fetched["source"] == "network" && fetched["width"] == 9 && fetched["height"] == 7, "\(fetched)")
            #expect(disk.lookups.load(ordering: .relaxed) - before == 1, "index queries for one get of a network miss")
            let path = try #require(fetched["path"]?.stringValue)
            #expect(FileManager.default.contents(atPath: path) == Data(TestHTTPServer.body(for: target)!))

            // A disk hit with data: the size and the row from one query, then the file.
            fixture.services.memory.purge()
            before = disk.lookups.load(ordering: .relaxed)
            let inline = try await fixture.object("get", ["url": url, "data": true])
            #expect(inline["source"] == "disk" && inline["data"]?.stringValue.flatMap { Data(base64Encoded: $0) } == Data(TestHTTPServer.body(for: target)!))
            #expect(disk.lookups.load(ordering: .relaxed) - before == 1, "index queries for one get of a disk hit with data")
            #expect(fixture.server.requestCount(target) == 1)
        }
    }

    @Test("add, evict, purge, cancel, retry, fsck: their replies, and the log names the peer of each change")
    func changingCommands() async throws {
        try await Self.withFixture { fixture in
            let urls = (0..<3).map { fixture.server.url("/img/add-\($0).png") }
            let added = try await fixture.object("add", [
                "urls": JSONValue(urls + ["ftp://example.com/x.png"]), "priority": "high", "pin": "1h",
            ])
            #expect(added["accepted"] == 3)
            let rejected = try #require(added["rejected"]?.arrayValue)
            #expect(rejected.count == 1 && rejected.first?["url"] == "ftp://example.com/x.png" && rejected.first?["code"] == "bad_url")
            #expect(rejected.first?["message"]?.stringValue?.isEmpty == false)
            // Each image is pinned once it is cached (add's pin): all three bodies are pinned bytes.
            let bodies = (0..<3).reduce(0) { $0 + (TestHTTPServer.body(for: "/img/add-\($1).png")?.count ?? 0) }
            let pinned = await eventually(timeout: .seconds(30)) {
                (try? fixture.services.disk.index.pinnedBytes(now: WallClock.nowMilliseconds())) == bodies
            }
            #expect(pinned, "add's pin did not pin the three images")
            let status = try await fixture.object("status")
            #expect(status["cache"]?["pinned_bytes"]?.intValue == bodies, "\(status)")

            #expect(try await fixture.object("evict", ["urls": JSONValue([urls[0]])]) == ["evicted": 1])
            #expect(await fixture.code("get", ["url": .string(urls[0]), "fetch": false])?.code == "not_found")
            let memory = try await fixture.object("purge", ["tier": "memory"])
            #expect(Self.keys(memory) == ["purged_bytes"])
            // evict removes an entry pinned or not; a purge of the disk tier keeps the pinned ones.
            let disk = try await fixture.object("purge")
            #expect(Self.keys(disk) == ["evicted", "bytes"])
            #expect(disk["evicted"] == 0 && disk["bytes"] == 0, "\(disk)")
            for url in urls.dropFirst() { #expect(fixture.services.disk.lookup(try ImageURL(url).cacheKey) != nil, "\(url)") }

            // urls[1] is cached, so no download of it runs: nothing to cancel.
            #expect(try await fixture.object("cancel", ["url": .string(urls[1])]) == ["cancelled": 0])
            // A download held open by the server is running: cancel stops it, and only once.
            let held = fixture.server.url("/img/cancel-held.png?gate=handler-cancel")
            #expect(try await fixture.object("add", ["urls": JSONValue([held])])["accepted"] == 1)
            #expect(await fixture.server.waitForInFlight(atLeast: 1, timeout: .seconds(30)))
            #expect(try await fixture.object("cancel", ["url": .string(held)]) == ["cancelled": 1])
            #expect(try await fixture.object("cancel", ["url": .string(held)]) == ["cancelled": 0])
            fixture.server.openGate("handler-cancel")
            #expect(try await fixture.object("retry", ["url": .string(urls[1])]) == ["requeued": 1])
            #expect(try await fixture.object("retry") == ["requeued": 0])
            let check = try await fixture.object("fsck")
            #expect(Self.keys(check) == ["checked", "bad", "removed"] && check["bad"] == 0 && check["removed"] == 0)

            let failed = try await fixture.object("failed")
            #expect(Self.keys(failed) == ["failures", "next"] && failed["next"] == .null)
            let log = fixture.log()
            for change in ["add: 3 URLs queued", "evict: 1 entries", "purge: disk tier", "cancel: ", "retry: ", "fsck: checked"] {
                #expect(log.contains(change), "no \(change) in the log:\n\(log)")
            }
            #expect(log.contains(#"peer="pid 1 uid 0 gid 0""#), "\(log)")
        }
    }

    @Test("lists and a list's failures: the members of each, a page cursor, and not_found for a list that is not there")
    func listsAndFailures() async throws {
        try await Self.withFixture { fixture in
            let spool = fixture.folder + "/spool"
            let lines = [fixture.server.url("/img/l-1.png")] + (0..<3).map { fixture.server.url("/status/404?n=\($0)") }
            try Data((lines.joined(separator: "\n") + "\n").utf8).write(to: URL(fileURLWithPath: spool + "/.l.txt.tmp"))
            #expect(rename(spool + "/.l.txt.tmp", spool + "/l.txt") == 0)
            let finished = await eventually(timeout: .seconds(60)) { ((try? fixture.services.spool.lists()) ?? []).first?.state == .failed }
            #expect(finished, "\((try? fixture.services.spool.lists()) ?? [])")
            let lists = try #require(try await fixture.object("lists")["lists"]?.arrayValue)
            #expect(lists.count == 1)
            let list = try #require(lists.first?.objectValue)
            #expect(Self.keys(list) == [
                "name", "state", "total", "cached", "already_cached", "failed", "pending", "bytes", "claimed_at", "format",
            ])
            #expect(list["name"] == "l.txt" && list["total"] == 4 && list["cached"] == 1 && list["failed"] == 3 && list["format"] == "text")
            #expect((list["claimed_at"]?.intValue ?? 0) > 1_600_000_000_000, "epoch milliseconds")

            let page = try await fixture.object("failed", ["list": "l.txt", "limit": 2])
            let failures = try #require(page["failures"]?.arrayValue)
            #expect(failures.count == 2)
            #expect(Self.keys(try #require(failures.first?.objectValue)) == ["url", "code", "message", "list", "line"])
            #expect(failures.first?["line"] == 2 && failures.first?["code"] == "http_404" && failures.first?["list"] == "l.txt")
            let next = try #require(page["next"]?.stringValue)
            let last = try await fixture.object("failed", ["list": "l.txt", "limit": 2, "after": .string(next)])
            #expect(last["failures"]?.arrayValue?.count == 1 && last["next"] == .null)
            // A list's cursor is not the remembered failures' cursor, and the other way round.
            #expect(await fixture.code("failed", ["after": .string(next)])?.code == "invalid_argument")

            #expect(await fixture.code("failed", ["list": "none.txt"])?.code == "not_found")
            #expect(await fixture.code("cancel", ["list": "none.txt"])?.code == "not_found")
            #expect(await fixture.code("retry", ["list": "none.txt"])?.code == "not_found")
            #expect(try await fixture.object("retry", ["list": "l.txt"]) == ["requeued": 3])
        }
    }

    /// A request with a bad argument, and the field its `invalid_argument` names.
    struct BadArgument: Sendable, CustomTestStringConvertible {
        let command: String
        let arguments: [String: JSONValue]
        let field: String
        var testDescription: String { "\(command) \(arguments)" }
    }

    static let badArguments: [BadArgument] = [
        BadArgument(command: "get", arguments: [:], field: "url"),
        BadArgument(command: "get", arguments: ["url": 7], field: "url"),
        BadArgument(command: "get", arguments: ["url": "ftp://example.com/a.png"], field: "url"),
        BadArgument(command: "get", arguments: ["url": "http://example.com/a.png", "data": "yes"], field: "data"),
        BadArgument(command: "get", arguments: ["url": "http://example.com/a.png", "fetch": 1], field: "fetch"),
        BadArgument(command: "get", arguments: ["url": "http://example.com/a.png", "wait": "no"], field: "wait"),
        BadArgument(command: "add", arguments: [:], field: "urls"),
        BadArgument(command: "add", arguments: ["urls": []], field: "urls"),
        BadArgument(command: "add", arguments: ["urls": "http://example.com/a.png"], field: "urls"),
        BadArgument(command: "add", arguments: ["urls": [1]], field: "urls"),
        BadArgument(command: "add", arguments: ["urls": ["http://example.com/a.png"], "priority": "urgent"], field: "priority"),
        BadArgument(command: "add", arguments: ["urls": ["http://example.com/a.png"], "pin": "forever"], field: "pin"),
        BadArgument(command: "add", arguments: ["urls": ["http://example.com/a.png"], "pin": 3600], field: "pin"),
        BadArgument(command: "evict", arguments: ["urls": ["not a url"]], field: "urls"),
        BadArgument(command: "evict", arguments: [:], field: "urls"),
        BadArgument(command: "purge", arguments: ["tier": "gpu"], field: "tier"),
        BadArgument(command: "cancel", arguments: [:], field: "url"),
        BadArgument(command: "cancel", arguments: ["list": 3], field: "list"),
        BadArgument(command: "cancel", arguments: ["url": "nonsense"], field: "url"),
        BadArgument(command: "retry", arguments: ["url": "nonsense"], field: "url"),
        BadArgument(command: "failed", arguments: ["limit": 0], field: "limit"),
        BadArgument(command: "failed", arguments: ["limit": 1001], field: "limit"),
        BadArgument(command: "failed", arguments: ["limit": "ten"], field: "limit"),
        BadArgument(command: "failed", arguments: ["after": "%%%"], field: "after"),
    ]

    @Test("every kind of bad argument is invalid_argument naming its field; nothing is queued")
    func invalidArgument() async throws {
        try await Self.withFixture { fixture in
            for bad in Self.badArguments {
                let error = await fixture.code(bad.command, bad.arguments)
                #expect(error?.code == "invalid_argument", "\(bad.testDescription): \(String(describing: error))")
                #expect(
                    error?.message.hasPrefix("invalid argument \"\(bad.field)\"") == true,
                    "\(bad.testDescription): \(String(describing: error))")
            }
            #expect(fixture.services.downloader.heldRequests == 0)
            #expect(fixture.server.totalRequests == 0)
        }
    }

    @Test("unknown_command, forbidden for a stranger's destructive commands, too_large and queue_full at their limits")
    func otherCodes() async throws {
        try await Self.withFixture { fixture in
            #expect(await fixture.code("frobnicate")?.code == "unknown_command")
            #expect(await fixture.code("subscribe")?.code == "unknown_command", "subscribe is the server's, not the handler's")
            let url = JSONValue.string(fixture.server.url("/img/big.png?w=64&h=64&bytes=5000"))
            _ = try await fixture.object("get", ["url": url])
            for (command, arguments) in [
                ("evict", ["urls": .array([url])]), ("purge", [:]), ("purge", ["tier": "disk"]), ("fsck", [:]), ("retry", [:]),
            ] as [(String, [String: JSONValue])] {
                #expect(await fixture.code(command, arguments, as: Fixture.stranger)?.code == "forbidden", "\(command) \(arguments)")
            }
            #expect(fixture.log().contains(#"refused evict: forbidden peer="pid 2 uid 65534 gid 65534""#))
            // What a stranger may do: read, purge the memory tier, fetch.
            _ = try await fixture.object("purge", ["tier": "memory"], as: Fixture.stranger)
            _ = try await fixture.object("get", ["url": url], as: Fixture.stranger)
            #expect(fixture.services.disk.lookup(try ImageURL(url.stringValue!).cacheKey) != nil, "the refused evict removed nothing")

            fixture.services.config.withLock { $0.maxDataBytes = 100 }
            let tooLarge = await fixture.code("get", ["url": url, "data": true])
            #expect(tooLarge?.code == "too_large", "\(String(describing: tooLarge))")
            _ = try await fixture.object("get", ["url": url])

            fixture.services.config.withLock { $0.maxAddURLs = 2 }
            let overAdd = await fixture.code("add", ["urls": ["http://a.test/1.png", "http://a.test/2.png", "http://a.test/3.png"]])
            #expect(overAdd?.code == "invalid_argument" && overAdd?.message.contains("max-add-urls") == true)

            // One request held by the server fills max-queued 1: the next add, get without waiting, and retry are refused.
            fixture.services.config.withLock { $0.maxQueued = 1 }
            let held = fixture.server.url("/img/held.png?gate=handler-held")
            #expect(try await fixture.object("add", ["urls": JSONValue([held])])["accepted"] == 1)
            #expect(await fixture.server.waitForInFlight(atLeast: 1, timeout: .seconds(30)))
            let more = JSONValue.string(fixture.server.url("/img/more.png"))
            #expect(await fixture.code("add", ["urls": .array([more])])?.code == "queue_full")
            #expect(await fixture.code("get", ["url": more, "wait": false])?.code == "queue_full")
            #expect(await fixture.code("retry", ["url": more])?.code == "queue_full")
            #expect(fixture.server.requestCount("/img/more.png") == 0)
            fixture.server.openGate("handler-held")
        }
    }
}
