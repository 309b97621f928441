import Foundation
@testable import ImgdDaemon
import ImgdProtocol
import ImgdTestSupport
import NIOCore
import Testing

@Suite("Control socket: requests and replies", .timeLimit(.minutes(5)), .offThePool)
struct ControlServerTests {
    @Test("ping: one request, one exact reply line")
    func ping() async throws {
        let folder = try ControlTestFolder()
        let fixture = try await ControlTestServer.start(at: folder.socketPath)
        let client = try await fixture.connect()
        try await client.send(#"{"id":1,"cmd":"ping"}"#)
        #expect(try await client.nextLine() == #"{"id":1,"ok":true,"result":{"pong":true}}"#)
        #expect(fixture.server.connectionCount == 1)
        await client.close()
        await fixture.stop()
    }

    @Test("the id is echoed exactly, whatever JSON it is; absent is null")
    func idEcho() async throws {
        let folder = try ControlTestFolder()
        let fixture = try await ControlTestServer.start(at: folder.socketPath)
        let client = try await fixture.connect()
        let ids = [
            "1", "1.5", "\"x\"", "null", "[1,{\"a\":true}]", "9223372036854775807", "-9223372036854775808",
            "0.1", "-2.5e-8", "true", "{\"b\":[],\"a\":\"c/d\"}", "\"héllo ☃ 😀\"", "\"tab\\there \\\"quoted\\\" back\\\\slash\"",
            "\"\\u0000\\u001f\\n\"", "\"\\ud83d\\ude00\"", "[]", "{}",
        ]
        for id in ids {
            let reply = try await client.request("{\"id\":\(id),\"cmd\":\"ping\"}")
            #expect(reply["id"] == (try JSONValue(parsing: id)), "id \(id)")
            #expect(reply["ok"] == true)
        }
        // Literally, for a few.
        try await client.send(#"{"cmd":"ping","id":"a/b"}"#)
        #expect(try await client.nextLine() == #"{"id":"a/b","ok":true,"result":{"pong":true}}"#)
        try await client.send(#"{"cmd":"ping","id":9223372036854775807}"#)
        #expect(try await client.nextLine() == #"{"id":9223372036854775807,"ok":true,"result":{"pong":true}}"#)
        try await client.send(#"{"cmd":"ping","id":1.5}"#)
        #expect(try await client.nextLine() == #"{"id":1.5,"ok":true,"result":{"pong":true}}"#)
        try await client.send(#"{"cmd":"ping"}"#)
        #expect(try await client.nextLine() == #"{"id":null,"ok":true,"result":{"pong":true}}"#)
        await client.close()
        await fixture.stop()
    }

    @Test("pipelined requests are answered in order, a slow one holding back those after it, answered-at-once ones too")
    func pipelining() async throws {
        let folder = try ControlTestFolder()
        let fixture = try await ControlTestServer.start(at: folder.socketPath)
        let client = try await fixture.connect()
        var lines = "{\"id\":0,\"cmd\":\"slow\"}\n"
        for index in 1..<50 {
            switch index % 3 {
            case 0: lines += "{\"id\":\(index),\"cmd\":\"ping\"}\n"
            case 1: lines += "{\"id\":\(index),\"cmd\":\"echo\",\"n\":\(index)}\n"
            default: lines += "{\"id\":\(index),\"cmd\":\"quick\"}\n"
            }
        }
        try await client.sendRaw(ByteBuffer(string: lines))
        #expect(await eventually(timeout: .seconds(30)) { fixture.gate.waiting == 1 })
        #expect(client.inbox.unread == 0)
        fixture.gate.open()
        for index in 0..<50 {
            let reply = try await client.nextValue()
            #expect(reply["id"] == JSONValue(index))
            #expect(reply["ok"] == true)
            if index > 0, index % 3 == 1 { #expect(reply["result"]?["n"] == JSONValue(index)) }
            // Answered at once on the event loop, yet still after the slow one before it.
            if index % 3 == 2 { #expect(reply["result"] == ["at_once": true]) }
        }
        await client.close()
        await fixture.stop()
    }

    @Test("requests fed one byte at a time, and many in one write, are framed the same; replies of one read share a write")
    func dripFeeding() async throws {
        let folder = try ControlTestFolder()
        let fixture = try await ControlTestServer.start(at: folder.socketPath)
        let client = try await fixture.connect()
        for byte in Array("{\"id\":1,\"cmd\":\"echo\",\"s\":\"é☃\"}\r\n".utf8) {
            try await client.sendRaw(ByteBuffer(bytes: [byte]))
        }
        #expect(try await client.nextLine() == #"{"id":1,"ok":true,"result":{"s":"é☃"}}"#)
        // As many as may wait at once (64), in one write.
        try await client.sendRaw(ByteBuffer(string: (0..<64).map { "{\"id\":\($0),\"cmd\":\"ping\"}\n" }.joined()))
        for index in 0..<64 {
            #expect(try await client.nextValue() == ["id": JSONValue(index), "ok": true, "result": ["pong": true]])
        }
        // Requests answered at once: the replies to the lines of one read go out together, not in
        // a write each (the 1.5 KB normally arrive in one read; a few reads at most).
        let writesBefore = fixture.server.metrics.writes
        try await client.sendRaw(ByteBuffer(string: (0..<64).map { "{\"id\":\($0),\"cmd\":\"quick\"}\n" }.joined()))
        for index in 0..<64 {
            #expect(try await client.nextValue() == ["id": JSONValue(index), "ok": true, "result": ["at_once": true]])
        }
        let writes = fixture.server.metrics.writes - writesBefore
        #expect(writes <= 8, "\(writes) writes for 64 replies")
        await client.close()
        await fixture.stop()
    }

    @Test("bad JSON, a non-object, a missing or non-string cmd, bad UTF-8: bad_request, and the connection still works")
    func badRequests() async throws {
        let folder = try ControlTestFolder()
        let fixture = try await ControlTestServer.start(at: folder.socketPath)
        let client = try await fixture.connect()

        let notJSON = try await client.request(#"{"id":1,"cmd":"ping""#)
        #expect(notJSON["ok"] == false)
        #expect(notJSON["id"] == .null)
        #expect(notJSON["error"]?["code"] == "bad_request")
        #expect(notJSON["error"]?["message"]?.stringValue?.hasPrefix("invalid JSON at byte") == true)

        let array = try await client.request("[1,2]")
        #expect(array["error"]?["code"] == "bad_request")
        #expect(array["error"]?["message"] == "a request must be a JSON object, not an array")

        let missing = try await client.request(#"{"id":7}"#)
        #expect(missing["error"]?["code"] == "bad_request")
        #expect(missing["id"] == 7)
        #expect(missing["error"]?["message"] == "\"cmd\" is missing")

        let number = try await client.request(#"{"id":"n","cmd":3}"#)
        #expect(number["error"]?["code"] == "bad_request")
        #expect(number["id"] == "n")

        var invalid = ByteBuffer(string: "{\"id\":2,\"cmd\":\"")
        invalid.writeBytes([0xC3, 0x28])
        invalid.writeString("\"}\n")
        try await client.sendRaw(invalid)
        #expect(try await client.nextValue()["error"]?["code"] == "bad_request")

        #expect(try await client.request(#"{"id":8,"cmd":"ping"}"#) == ["id": 8, "ok": true, "result": ["pong": true]])
        await client.close()
        await fixture.stop()
    }

    @Test("blank lines are ignored; \\r\\n is accepted")
    func blankLines() async throws {
        let folder = try ControlTestFolder()
        let fixture = try await ControlTestServer.start(at: folder.socketPath)
        let client = try await fixture.connect()
        try await client.sendRaw(ByteBuffer(string: "\n\n   \n\t\r\n{\"id\":1,\"cmd\":\"ping\"}\r\n\n\r\n"))
        #expect(try await client.nextValue()["id"] == 1)
        try await client.send(#"{"id":2,"cmd":"ping"}"#)
        #expect(try await client.nextValue()["id"] == 2)
        #expect(client.inbox.unread == 0)
        await client.close()
        await fixture.stop()
    }

    @Test("the handler's errors pass through: unknown_command, invalid_argument, a download error's code")
    func handlerErrors() async throws {
        let folder = try ControlTestFolder()
        let fixture = try await ControlTestServer.start(at: folder.socketPath)
        let client = try await fixture.connect()
        try await client.send(#"{"cmd":"frobnicate"}"#)
        #expect(
            try await client.nextLine()
                == #"{"error":{"code":"unknown_command","message":"unknown command \"frobnicate\"; see Protocol.md"},"id":null,"ok":false}"#)
        let invalid = try await client.request(#"{"id":2,"cmd":"args","url":5}"#)
        #expect(invalid["error"]?["code"] == "invalid_argument")
        #expect(invalid["error"]?["message"] == "invalid argument \"url\": must be a string, not a number")
        let fine = try await client.request(#"{"id":3,"cmd":"args","url":"u","urls":["a"],"unknown":1}"#)
        #expect(fine["result"] == ["url": "u", "fetch": true, "urls": ["a"]])
        let download = try await client.request(#"{"id":4,"cmd":"fail"}"#)
        #expect(download["error"]?["code"] == "http_404")
        await client.close()
        await fixture.stop()
    }

    @Test("the peer's credentials are this process's pid, uid and gid")
    func peerCredentials() async throws {
        let folder = try ControlTestFolder()
        let fixture = try await ControlTestServer.start(at: folder.socketPath)
        let client = try await fixture.connect()
        let reply = try await client.request(#"{"cmd":"whoami"}"#)
        #expect(reply["result"] == ["pid": JSONValue(getpid()), "uid": JSONValue(getuid()), "gid": JSONValue(getgid())])
        await client.close()
        await fixture.stop()
    }

    @Test("a client that shuts down its side after its requests still gets the replies, then the connection closes")
    func halfClose() async throws {
        let folder = try ControlTestFolder()
        let fixture = try await ControlTestServer.start(at: folder.socketPath)
        let client = try await fixture.connect()
        try await client.sendRaw(ByteBuffer(string: "{\"id\":1,\"cmd\":\"slow\"}\n{\"id\":2,\"cmd\":\"ping\"}"))
        try await client.channel.close(mode: .output).get()
        #expect(await eventually(timeout: .seconds(30)) { fixture.gate.waiting == 1 })
        fixture.gate.open()
        #expect(try await client.nextValue()["id"] == 1)
        // An unterminated last line counts.
        #expect(try await client.nextValue()["id"] == 2)
        #expect(await client.waitUntilClosed())
        #expect(await eventually(timeout: .seconds(30)) { fixture.server.connectionCount == 0 })
        await fixture.stop()
    }
}
