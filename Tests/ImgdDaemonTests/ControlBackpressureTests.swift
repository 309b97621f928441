import Foundation
@testable import ImgdDaemon
import ImgdTestSupport
import NIOCore
import Testing

/// Replies larger than half the output limit (as `get` with `data: true` gives, up to
/// `max-data-bytes`): a connection's queued output passes its limit by one reply at most, a
/// client that reads late still gets every reply, and one that never reads is let go.
@Suite("Control socket: backpressure on replies")
struct ControlBackpressureTests {
    /// A 1 MiB output limit rather than the default 4 MiB: the same rules at a quarter of the
    /// cost (the replies are built and encoded on 2 cores shared with the rest of the suite).
    static let limit = 1_048_576
    /// Each reply: 768 KiB of data and its JSON frame, over half the limit on its own.
    static let replyData = 768 * 1024
    static let frame = 64

    static func limits(slowReaderTimeout: Duration = .seconds(10)) -> ControlLimits {
        ControlLimits(maxQueuedOutputBytes: limit, slowReaderTimeout: slowReaderTimeout)
    }

    static func requests(_ count: Int) -> ByteBuffer {
        ByteBuffer(string: (0..<count).map { "{\"id\":\($0),\"cmd\":\"big\",\"bytes\":\(replyData)}\n" }.joined())
    }

    @Test("a client that pipelines six replies of 3/4 of the output limit and reads only later gets every one; never more than the limit and one reply queued")
    func lateReaderGetsEveryReply() async throws {
        let folder = try ControlTestFolder()
        let fixture = try await ControlTestServer.start(at: folder.socketPath, limits: Self.limits())
        let client = try await fixture.connect(reading: false)
        try await client.sendRaw(Self.requests(6))
        // The first replies are queued and the connection is over its mark: the rest wait.
        #expect(await eventually { fixture.server.metrics.largestQueuedOutputBytes >= Self.limit / 2 })
        client.startReading()
        for index in 0..<6 {
            let reply = try await client.nextValue()
            #expect(reply["id"] == JSONValue(index))
            #expect(reply["result"]?["data"]?.stringValue?.utf8.count == Self.replyData, "reply \(index)")
        }
        #expect(fixture.server.metrics.slowReaderDisconnects == 0)
        let largest = fixture.server.metrics.largestQueuedOutputBytes
        #expect(largest <= Self.limit + Self.replyData + Self.frame, "queued \(largest) bytes")
        #expect(try await client.request(#"{"id":"after","cmd":"ping"}"#)["ok"] == true)
        await client.close()
        await fixture.stop()
    }

    @Test("a client that never reads its large replies: queued output stays under the limit and one reply, it is disconnected after the slow-reader timeout, another client is served")
    func neverReaderIsBoundedThenDropped() async throws {
        let folder = try ControlTestFolder()
        let fixture = try await ControlTestServer.start(at: folder.socketPath, limits: Self.limits(slowReaderTimeout: .seconds(1)))
        let stalled = try await fixture.connect(reading: false)
        let other = try await fixture.connect()
        try await stalled.sendRaw(Self.requests(20))
        #expect(await eventually { fixture.server.metrics.slowReaderDisconnects == 1 })
        #expect(await eventually { fixture.server.connectionCount == 1 })
        let largest = fixture.server.metrics.largestQueuedOutputBytes
        #expect(largest <= Self.limit + Self.replyData + Self.frame, "queued \(largest) bytes")
        #expect(try await other.request(#"{"id":1,"cmd":"ping"}"#)["ok"] == true)
        #expect(fixture.log.lines.filter { $0.contains("does not read") }.count == 1)
        await stalled.close()
        await other.close()
        await fixture.stop()
    }

    @Test("a client that reads in bursts with pauses shorter than the slow-reader timeout is never disconnected")
    func slowButSteadyReader() async throws {
        let folder = try ControlTestFolder()
        let fixture = try await ControlTestServer.start(at: folder.socketPath, limits: Self.limits(slowReaderTimeout: .seconds(2)))
        let client = try await fixture.connect(reading: false)
        try await client.sendRaw(Self.requests(4))
        // The pauses are the behaviour under test (a client busy elsewhere), not a wait for the
        // server: 50 ms of reading, then 500 ms of none, until the four replies are in.
        var received = 0
        let started = ContinuousClock.now
        var pauses = 0
        while received < 4, ContinuousClock.now - started < .seconds(120), !client.inbox.isClosed {
            client.startReading()
            try? await Task.sleep(for: .milliseconds(50))
            try await client.stopReading()
            while client.inbox.popLine() != nil { received += 1 }
            try? await Task.sleep(for: .milliseconds(500))
            pauses += 1
        }
        while client.inbox.popLine() != nil { received += 1 }
        #expect(received == 4, "after \(pauses) pauses; closed: \(client.inbox.isClosed); log: \(fixture.log.lines)")
        #expect(fixture.server.metrics.slowReaderDisconnects == 0)
        await client.close()
        await fixture.stop()
    }
}
