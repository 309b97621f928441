import ImgdCore
import Foundation
import ImgdProtocol
import ImgdTestSupport
import Testing

@testable import ImgctlCLI

@Suite("warm", .timeLimit(.minutes(5)), .offThePool)
struct WarmCommandTests {
    typealias Server = ScriptedControlServer

    /// A spool with the daemon's folders, and a link list to submit.
    struct Fixture {
        let scratch: ScratchFolder
        let root: String
        let spool: String
        let source: String
        let contents = (1...500).map { "http://img.test/\($0).png" }.joined(separator: "\n") + "\n"

        init() throws {
            scratch = try ScratchFolder("imgctl-test")
            root = scratch.path
            spool = root + "/spool"
            for folder in ["", "/.claimed", "/done", "/failed"] {
                try FileManager.default.createDirectory(atPath: spool + folder, withIntermediateDirectories: true)
            }
            try FileManager.default.createDirectory(atPath: root + "/lists", withIntermediateDirectories: true)
            source = root + "/lists/links.txt"
            try Data(contents.utf8).write(to: URL(fileURLWithPath: source))
        }

        func files(in folder: String = "") throws -> [String] {
            try FileManager.default.contentsOfDirectory(atPath: spool + folder).sorted()
        }

        func read(_ name: String) throws -> String {
            String(decoding: try Data(contentsOf: URL(fileURLWithPath: spool + "/" + name)), as: UTF8.self)
        }
    }

    /// A daemon whose status names `spool` and whose `lists` answers `lists(ordinal)`.
    static func daemon(spool: String, lists: @escaping @Sendable (Int) -> [ScriptedControlServer.Action]) throws -> Server {
        try Server { request in
            switch request.command {
            case "status":
                return [.line(Server.success(request.id, RecordedReply.value("status", replacing: ["spool": .string(spool)]).jsonText))]
            case "subscribe":
                return [.line(Server.success(request.id, RecordedReply.value("subscribe", replacing: ["subscribed": .array([.string("list_done")])]).jsonText))]
            case "lists":
                return lists(request.ordinal).map { action in
                    if case .line(let text) = action, text.hasPrefix("RESULT:") {
                        return .line(Server.success(request.id, String(text.dropFirst(7))))
                    }
                    return action
                }
            case "failed":
                return [.line(Server.success(request.id, Self.failures.jsonText))]
            default:
                return [.line(Server.failure(request.id, "unknown_command", "no"))]
            }
        }
    }

    /// The daemon's `failed --list` reply, for one failure on line 7 of links.txt.
    static let failures: JSONValue = {
        guard case .array(let recorded) = RecordedReply.value("failed-list")["failures"], case .object(var failure) = recorded.first else {
            preconditionFailure("failed-list.json holds no failure")
        }
        let values: [String: JSONValue] = [
            "url": .string("http://img.test/7.png"), "code": .string("http_404"), "message": .string("Not Found"),
            "list": .string("links.txt"), "line": .int(7),
        ]
        for (key, value) in values {
            precondition(failure[key] != nil, "failed-list.json's failure has no \(key)")
            failure[key] = value
        }
        return RecordedReply.value("failed-list", replacing: ["failures": .array([.object(failure)])])
    }()

    /// `lists` naming one list, from the daemon's recorded entry.
    static func lists(state: String, cached: Int, alreadyCached: Int, failed: Int, pending: Int, bytes: Int) -> String {
        "RESULT:" + RecordedReply.lists([
            RecordedReply.list(
                name: "links.txt", state: state, total: 500, cached: cached, alreadyCached: alreadyCached, failed: failed,
                pending: pending, bytes: bytes)
        ])
    }

    @Test("writes .NAME.tmp completely, then renames it to NAME: the final name never shows a partial list")
    func temporaryThenRename() throws {
        let fixture = try Fixture()
        defer { fixture.scratch.remove() }
        let server = try Self.daemon(spool: fixture.spool) { _ in [.line(#"RESULT:{"lists":[]}"#)] }
        defer { server.stop() }
        let renames = Locked<[(String, String)]>([])
        let run = ImgctlRun(["warm", "--socket", server.path, fixture.source]) { context in
            context.beforeSpoolRename = { temporary, final in
                // At the rename: the temporary file holds the whole list, the final name is free.
                let written = (try? Data(contentsOf: URL(fileURLWithPath: temporary))).map { String(decoding: $0, as: UTF8.self) }
                #expect(written == fixture.contents)
                #expect(!ImgctlContext.lstatExists(final))
                renames.withLock { $0.append((temporary, final)) }
            }
        }
        #expect(run.status == 0, "\(run.stderr.text)")
        #expect(run.stdout.text == "submitted \(fixture.source) as links.txt\n")
        let sequence = renames.withLock { $0 }
        try #require(sequence.count == 1)
        #expect(sequence[0].0 == fixture.spool + "/.links.txt.tmp")
        #expect(sequence[0].1 == fixture.spool + "/links.txt")
        // The daemon skips names starting with "." and ending in .tmp: both hold for the temp.
        let temporaryName = String(sequence[0].0.split(separator: "/").last!)
        #expect(temporaryName.hasPrefix(".") && temporaryName.hasSuffix(".tmp"))
        #expect(try fixture.files() == [".claimed", "done", "failed", "links.txt"])
        #expect(try fixture.read("links.txt") == fixture.contents)
        // Group-readable whatever the umask: the daemon reads lists through the group bits.
        let mode = try FileManager.default.attributesOfItem(atPath: fixture.spool + "/links.txt")[.posixPermissions] as? Int
        #expect(mode == 0o640)
        #expect(server.received.map(\.command) == ["status", "lists"])
    }

    @Test("a taken name gets a numeric suffix before the extension")
    func uniqueNames() throws {
        let fixture = try Fixture()
        defer { fixture.scratch.remove() }
        // links.txt waits in the spool, links-1.txt finished earlier, links-2.txt is a recent list.
        try Data("x\n".utf8).write(to: URL(fileURLWithPath: fixture.spool + "/links.txt"))
        try Data("x\n".utf8).write(to: URL(fileURLWithPath: fixture.spool + "/done/links-1.txt"))
        let recent = RecordedReply.list(name: "links-2.txt", state: "done", total: 1, cached: 1, alreadyCached: 0, failed: 0, pending: 0, bytes: 10)
        let server = try Self.daemon(spool: fixture.spool) { _ in [.line("RESULT:" + RecordedReply.lists([recent]))] }
        defer { server.stop() }
        let run = ImgctlRun(["warm", "--socket", server.path, "--json", fixture.source, fixture.source])
        #expect(run.status == 0, "\(run.stderr.text)")
        #expect(
            run.stdout.lines == [
                #"{"file":"\#(fixture.source)","name":"links-3.txt","path":"\#(fixture.spool)/links-3.txt"}"#,
                #"{"file":"\#(fixture.source)","name":"links-4.txt","path":"\#(fixture.spool)/links-4.txt"}"#,
            ])
        #expect(try fixture.read("links-3.txt") == fixture.contents)
        #expect(try fixture.read("links-4.txt") == fixture.contents)
        #expect(try fixture.read("links.txt") == "x\n")  // never replaced
    }

    @Test("--wait: subscribes first, polls lists, prints the summary; exit 0 when done")
    func waitDone() throws {
        let fixture = try Fixture()
        defer { fixture.scratch.remove() }
        let server = try Self.daemon(spool: fixture.spool) { ordinal in
            switch ordinal {
            case 1: return [.line(#"RESULT:{"lists":[]}"#)]  // before submitting: the known names
            case 2: return [.line(#"RESULT:{"lists":[]}"#)]  // not claimed yet
            case 3:
                return [
                    .line(Self.lists(state: "active", cached: 200, alreadyCached: 50, failed: 0, pending: 250, bytes: 1024)),
                    .drip(
                        Server.event(
                            "list_done", seq: 3,
                            RecordedReply.value(
                                "event-list_done",
                                replacing: [
                                    "name": .string("links.txt"), "state": .string("done"), "cached": .int(450), "already_cached": .int(50),
                                    "failed": .int(0),
                                ]
                            ).jsonText)),
                ]
            default:
                return [
                    .line(Self.lists(state: "done", cached: 450, alreadyCached: 50, failed: 0, pending: 0, bytes: 1536))
                ]
            }
        }
        defer { server.stop() }
        let run = ImgctlRun(["warm", "--socket", server.path, "--wait", fixture.source])
        #expect(run.status == 0, "\(run.stderr.text)")
        #expect(
            run.stdout.lines == [
                "submitted \(fixture.source) as links.txt",
                "links.txt: done: 500 URLs: 450 cached, 50 already cached, 0 failed (1.5 KiB)",
            ])
        #expect(server.received.map(\.command) == ["status", "subscribe", "lists", "lists", "lists", "lists"])
        #expect(server.received[1].raw == #"{"cmd":"subscribe","events":["list_done"],"id":2}"#)
        // Not a terminal: plain progress lines on stderr, one per change of state.
        #expect(run.stderr.lines.first == "imgctl: links.txt  waiting for imgd to claim it")
        #expect(run.stderr.text.contains("imgctl: links.txt  [############............]  250/500  cached 200, already 50, failed 0"))
        #expect(run.stderr.lines.last?.hasSuffix("  done") == true)
    }

    @Test("--wait: a failed list exits 1 and shows its failures")
    func waitFailed() throws {
        let fixture = try Fixture()
        defer { fixture.scratch.remove() }
        let server = try Self.daemon(spool: fixture.spool) { ordinal in
            ordinal == 1
                ? [.line(#"RESULT:{"lists":[]}"#)]
                : [
                    .line(Self.lists(state: "failed", cached: 499, alreadyCached: 0, failed: 1, pending: 0, bytes: 10))
                ]
        }
        defer { server.stop() }
        let run = ImgctlRun(["warm", "--socket", server.path, "--wait", fixture.source])
        #expect(run.status == 1)
        #expect(run.stdout.lines.last == "links.txt: failed: 500 URLs: 499 cached, 0 already cached, 1 failed (10 B)")
        #expect(run.stderr.text.contains("imgctl: links.txt:7: http://img.test/7.png: http_404: Not Found\n"))
        #expect(server.received.last?.raw == #"{"cmd":"failed","id":5,"list":"links.txt"}"#)
    }

    @Test("--wait on a terminal: one bar per list, redrawn in place")
    func terminalProgress() {
        let output = CapturedOutput()
        let renderer = ListProgressRenderer(output: output, isTerminal: true, plainInterval: .seconds(2))
        var a = ListProgress(name: "a.txt")
        var b = ListProgress(name: "bb.json")
        renderer.draw([a, b])
        a.update(from: .object(["state": .string("active"), "total": .int(4), "cached": .int(1), "already_cached": .int(1)]))
        b.update(from: .object(["state": .string("done"), "total": .int(2), "cached": .int(2)]))
        renderer.draw([a, b])
        let bar = String(repeating: "#", count: 12) + String(repeating: ".", count: 12)
        #expect(
            output.text
                == "\r\u{1B}[Ka.txt    waiting for imgd to claim it\n\r\u{1B}[Kbb.json  waiting for imgd to claim it\n"
                + "\u{1B}[2A\r\u{1B}[Ka.txt    [\(bar)]  2/4  cached 1, already 1, failed 0\n"
                + "\r\u{1B}[Kbb.json  [\(String(repeating: "#", count: 24))]  2/2  cached 2, already 0, failed 0  done\n")
    }

    @Test("a status without a spool is a bad reply, and nothing is written")
    func noSpool() throws {
        // The daemon's status without its spool field (a daemon before spools, or a broken one).
        guard case .object(var status) = RecordedReply.value("status") else { return }
        status["spool"] = nil
        let reply = JSONValue.object(status).jsonText
        let server = try Server { request in [.line(Server.success(request.id, reply))] }
        defer { server.stop() }
        let run = ImgctlRun(["warm", "--socket", server.path, "/nonexistent/links.txt"])
        #expect(run.status == 1)
        #expect(run.stderr.text.contains("status names no spool folder"))
    }

    @Test("an unreadable file is reported; the others are still submitted; exit 1")
    func unreadableFile() throws {
        let fixture = try Fixture()
        defer { fixture.scratch.remove() }
        let server = try Self.daemon(spool: fixture.spool) { _ in [.line(#"RESULT:{"lists":[]}"#)] }
        defer { server.stop() }
        let run = ImgctlRun(["warm", "--socket", server.path, fixture.root + "/missing.txt", fixture.source])
        #expect(run.status == 1)
        #expect(run.stderr.text == "imgctl: cannot read \(fixture.root)/missing.txt: No such file or directory\n")
        #expect(try fixture.files() == [".claimed", "done", "failed", "links.txt"])
    }
}
