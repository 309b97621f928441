import Foundation
import ImgdProtocol
import ImgdTestSupport
import Testing

@testable import ImgctlCLI

#if canImport(Glibc)
import Glibc
#endif

/// imgctl's tests answer with replies recorded from the real daemon (`Tests/ImgctlTests/Fixtures`);
/// this suite asks a real daemon the same requests in the same scene and checks that each
/// fixture still has exactly the field names and value types of the reply the daemon sends now,
/// so the fixtures cannot drift from the daemon again. `IMGD_RECORD_FIXTURES=1` writes the
/// replies to the fixtures instead (then checks them, trivially): run it after a change to the
/// protocol, and read the diff.
@Suite("imgctl's fixtures are the daemon's replies", .timeLimit(.minutes(10)), .offThePool)
struct RecordedReplyTests {
    /// Where imgctl's tests read their fixtures.
    static let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("ImgctlTests/Fixtures").path

    static var isRecording: Bool { ProcessInfo.processInfo.environment["IMGD_RECORD_FIXTURES"] == "1" }

    @Test("every fixture has the field names and value types of the daemon's reply, and every reply has its fixture")
    func fixturesMatchTheDaemon() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let server = try await TestHTTPServer.start()
        let daemon = try await Self.startDaemon(in: scratch)
        let live: [String: JSONValue]
        do {
            live = try await Self.replies(daemon: daemon, server: server)
        } catch {
            kill(daemon.pid, SIGKILL)
            try? await server.shutdown()
            throw error
        }
        #expect(await daemon.stop() == 0, "log:\n\(daemon.log)")
        try await server.shutdown()

        if Self.isRecording {
            for (name, value) in live {
                try Data((value.jsonText + "\n").utf8).write(to: URL(fileURLWithPath: Self.folder + "/" + name + ".json"))
            }
        }
        let files = try FileManager.default.contentsOfDirectory(atPath: Self.folder).filter { $0.hasSuffix(".json") }
        #expect(Set(files) == Set(live.keys.map { $0 + ".json" }), "fixtures without a live reply, or replies without a fixture")
        for name in live.keys.sorted() {
            let path = Self.folder + "/" + name + ".json"
            guard let text = FileManager.default.contents(atPath: path), let recorded = (try? JSONValue(parsing: text)) else {
                Issue.record("\(name).json is missing or not JSON")
                continue
            }
            let differences = JSONShape(recorded).differences(from: JSONShape(live[name]!))
            #expect(differences.isEmpty, "\(name).json: \(differences.joined(separator: "; "))")
        }
    }

    /// A daemon whose memory-pressure source is a FIFO of the scratch folder, so `status` names
    /// the same source and a path on every machine (PSI is not everywhere).
    static func startDaemon(in scratch: ScratchFolder) async throws -> DaemonProcess {
        let fifo = scratch.path + "/pressure.fifo"
        guard mkfifo(fifo, 0o600) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        return try await DaemonProcess.start(in: scratch.path, environment: ["MEMORY_PRESSURE_WATCH": fifo])
    }

    /// The scene: every command imgctl sends, with each reply's `result` by fixture name, and
    /// the `data` of the first event of each kind as `event-NAME`.
    static func replies(daemon: DaemonProcess, server: TestHTTPServer) async throws -> [String: JSONValue] {
        var results: [String: JSONValue] = [:]
        let socket = daemon.socket
        func ask(_ name: String, _ line: String) async throws {
            let reply = try await onOwnThread { Result { try ControlClient(path: socket).call(line) } }.get()
            guard let parsed = (try? JSONValue(parsing: Array(reply.utf8))), parsed["ok"] == .bool(true), let result = parsed["result"] else {
                throw DaemonError(message: "\(name): \(line) was answered \(reply)")
            }
            results[name] = result
        }
        let events = try await daemon.subscribe()
        defer { events.close() }

        try await ask("hello", #"{"cmd":"hello"}"#)
        try await ask("ping", #"{"cmd":"ping"}"#)
        let subscribed = try await onOwnThread {
            Result { try ControlClient(path: socket).call(#"{"cmd":"subscribe","events":["fetched","failed"]}"#) }
        }.get()
        results["subscribe"] = (try? JSONValue(parsing: Array(subscribed.utf8)))?["result"]

        let added = server.url("/img/add.png")
        try await ask("add", #"{"cmd":"add","urls":["\#(added)","not a url"]}"#)
        guard await events.first("fetched", where: { $0["url"] as? String == added }) != nil else {
            throw DaemonError(message: "no fetched event for \(added)")
        }
        let got = server.url("/img/get.png")
        try await ask("get", #"{"cmd":"get","url":"\#(got)"}"#)
        try await ask("refresh", #"{"cmd":"refresh","urls":["\#(got)","\#(server.url("/img/never-cached.png"))"]}"#)
        try await ask("get-data", #"{"cmd":"get","url":"\#(server.url("/img/data.png?w=2&h=2"))","data":true}"#)

        // A URL held by the server: asked for without waiting, then cancelled.
        let held = server.url("/img/held.png?gate=held")
        try await ask("get-pending", #"{"cmd":"get","url":"\#(held)","wait":false}"#)
        guard await eventually(timeout: .seconds(10), { server.requestCount("/img/held.png?gate=held") == 1 }) else {
            throw DaemonError(message: "the held URL was not asked for")
        }
        try await ask("cancel", #"{"cmd":"cancel","url":"\#(held)"}"#)
        server.openGate("held")

        // A list with a good URL and one the server answers 404.
        let missing = server.url("/status/404")
        try daemon.drop("links.txt", server.url("/img/list.png") + "\n" + missing + "\n")
        guard await daemon.finishedList("links.txt") != nil, await events.listDone("links.txt") != nil else {
            throw DaemonError(message: "links.txt did not finish")
        }
        try await ask("lists", #"{"cmd":"lists"}"#)
        try await ask("failed-list", #"{"cmd":"failed","list":"links.txt"}"#)
        try await ask("failed", #"{"cmd":"failed"}"#)
        try await ask("retry", #"{"cmd":"retry","url":"\#(missing)"}"#)
        guard await events.first("failed", where: { $0["url"] as? String == missing }) != nil else {
            throw DaemonError(message: "no failed event for \(missing)")
        }

        try await ask("evict", #"{"cmd":"evict","urls":["\#(got)"]}"#)
        try await ask("purge-memory", #"{"cmd":"purge","tier":"memory"}"#)
        try await ask("purge-disk", #"{"cmd":"purge","tier":"disk"}"#)
        try await ask("fsck", #"{"cmd":"fsck"}"#)
        try await ask("stats", #"{"cmd":"stats"}"#)
        try await ask("metrics", #"{"cmd":"metrics"}"#)
        try await ask("status", #"{"cmd":"status"}"#)

        for name in ["fetched", "failed", "evicted", "list_claimed", "list_done", "memory_pressure"] {
            guard let event = await events.first(name, timeout: .seconds(10)),
                let data = (try? JSONValue(parsing: Array(event.line.utf8)))?["data"]
            else {
                throw DaemonError(message: "no \(name) event; events: \(events.events.map(\.name))")
            }
            results["event-" + name] = data
        }
        return results
    }
}
