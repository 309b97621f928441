import Foundation
import ImgdCore
import ImgdProtocol
import ImgdTestSupport
import Testing

@testable import ImgctlCLI

@Suite("get", .timeLimit(.minutes(5)), .offThePool)
struct GetCommandTests {
    typealias Server = ScriptedControlServer

    /// Every byte value, then some noise: what base64 must carry exactly.
    static let image: [UInt8] = Array(0...255) + (0..<70_000).map { UInt8(truncatingIfNeeded: $0 &* 2_654_435_761 >> 7) }

    static func dataServer(bytes: [UInt8] = image, sha256: String? = nil) throws -> Server {
        let digest = sha256 ?? SHA256Digest(of: bytes).hex
        let encoded = Data(bytes).base64EncodedString()
        // The daemon's reply to `get` with `data: true`, carrying these bytes instead.
        let reply = RecordedReply.value(
            "get-data",
            replacing: ["path": .string("/cache/ab/cd"), "bytes": JSONValue(bytes.count), "sha256": .string(digest), "data": .string(encoded)])
        return try Server { request in
            [
                .drip(Server.event("fetched", seq: 1, RecordedReply.text("event-fetched"))),
                .line(Server.success(request.id, reply.jsonText)),
            ]
        }
    }

    @Test("-o FILE writes exactly the decoded bytes, by temp file and rename, and asks for a descriptor and data (an imgd without the fd feature sends the data)")
    func writesFile() throws {
        let server = try Self.dataServer()
        defer { server.stop() }
        let scratch = try ScratchFolder("imgctl-test")
        defer { scratch.remove() }
        let folder = scratch.path
        let target = folder + "/out.png"
        try Data("old".utf8).write(to: URL(fileURLWithPath: target))
        let run = ImgctlRun(["get", "--socket", server.path, "-o", target, "http://a.test/x.png"])
        #expect(run.status == 0, "\(run.stderr.text)")
        #expect(run.stdout.text.isEmpty)
        #expect(try [UInt8](Data(contentsOf: URL(fileURLWithPath: target))) == Self.image)
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder) == ["out.png"])  // no temp file left
        #expect(server.received.map(\.raw) == [#"{"cmd":"get","data":true,"fd":true,"id":1,"url":"http://a.test/x.png"}"#])
    }

    @Test("-o - writes the bytes to stdout; --json with -o FILE prints the reply without its data")
    func writesStdout() throws {
        let server = try Self.dataServer()
        defer { server.stop() }
        let run = ImgctlRun(["get", "--socket", server.path, "-o", "-", "http://a.test/x.png"])
        #expect(run.status == 0)
        #expect(run.stdout.bytes == Self.image)
        let scratch = try ScratchFolder("imgctl-test")
        defer { scratch.remove() }
        let folder = scratch.path
        let json = ImgctlRun(["get", "--socket", server.path, "--json", "-o", folder + "/o.png", "http://a.test/x.png"])
        #expect(json.status == 0)
        let line = try #require(json.stdout.lines.first)
        #expect(!line.contains("\"data\""))
        #expect(line.contains(#""path":"/cache/ab/cd""#))
        #expect(line.hasPrefix(#"{"id":1,"ok":true,"#))
    }

    @Test("bytes that do not match the reply's SHA-256 are refused and nothing is written")
    func checksumMismatch() throws {
        let server = try Self.dataServer(sha256: String(repeating: "0", count: 64))
        defer { server.stop() }
        let scratch = try ScratchFolder("imgctl-test")
        defer { scratch.remove() }
        let folder = scratch.path
        let run = ImgctlRun(["get", "--socket", server.path, "-o", folder + "/out.png", "http://a.test/x.png"])
        #expect(run.status == 1)
        #expect(run.stderr.text.contains("SHA-256"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder).isEmpty)
    }

    @Test("without -o: the path alone")
    func printsPath() throws {
        let reply = RecordedReply.value("get")
        let path = try #require(reply["path"]?.stringValue)
        let server = try Server { request in [.line(Server.success(request.id, reply.jsonText))] }
        defer { server.stop() }
        let run = ImgctlRun(["get", "--socket", server.path, "http://a.test/a.png"])
        #expect(run.status == 0)
        #expect(run.stdout.text == path + "\n")
        #expect(server.received.map(\.raw) == [#"{"cmd":"get","id":1,"url":"http://a.test/a.png"}"#])
    }
}
