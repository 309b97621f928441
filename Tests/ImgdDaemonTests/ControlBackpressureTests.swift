import Foundation
@testable import ImgdDaemon
import ImgdProtocol
import ImgdTestSupport
import NIOCore
import Testing

/// Replies larger than half the output limit (as `get` with `data: true` gives, up to
/// `max-data-bytes`): a connection's queued output passes its limit by one reply at most, a
/// client that reads late still gets every reply, and one that never reads is let go.
@Suite("Control socket: backpressure on replies", .timeLimit(.minutes(5)), .offThePool)
struct ControlBackpressureTests {
    /// A 512 KiB output limit rather than the default 4 MiB: the same rules at an eighth of the
    /// cost (replies are encoded on the event loops the rest of the suite shares, on 2 cores).
    /// Still over twice the kernel's socket buffer (~208 KiB), so output does queue up.
    static let limit = 512 * 1024
    /// Each reply: 384 KiB of data and its JSON frame, over half the limit on its own.
    static let replyData = 384 * 1024
    static let frame = 64

    static func limits(slowReaderTimeout: Duration = .seconds(10)) -> ControlLimits {
        ControlLimits(maxQueuedOutputBytes: limit, slowReaderTimeout: slowReaderTimeout)
    }

    static func requests(_ count: Int) -> ByteBuffer {
        ByteBuffer(string: (0..<count).map { "{\"id\":\($0),\"cmd\":\"big\",\"bytes\":\(replyData)}\n" }.joined())
    }

    @Test("a client that pipelines five replies of 3/4 of the output limit and reads only later gets every one; never more than the limit and one reply queued")
    func lateReaderGetsEveryReply() async throws {
        let folder = try ControlTestFolder()
        let fixture = try await ControlTestServer.start(at: folder.socketPath, limits: Self.limits())
        let client = try await fixture.connect(reading: false)
        try await client.sendRaw(Self.requests(5))
        // The first replies are queued and the connection is over its mark: the rest wait.
        #expect(await eventually { fixture.server.metrics.largestQueuedOutputBytes >= Self.limit / 2 })
        client.startReading()
        for index in 0..<5 {
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
        try await stalled.sendRaw(Self.requests(10))
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
        let fixture = try await ControlTestServer.start(at: folder.socketPath, limits: Self.limits(slowReaderTimeout: .seconds(3 * Sanitizer.slowdown)))
        let path = folder.socketPath
        let request = Array(Self.requests(4).readableBytesView)
        // A blocking client on a thread of its own, so its pauses are what it sleeps and do not
        // depend on the test pool: 50 ms of reading what has come, then 300 ms of none (a client
        // busy elsewhere), until the four replies are in or the server closes.
        let run = await onOwnThread { () -> (replies: Int, closed: Bool, pauses: Int) in
            let descriptor = ControlRawSocket.connect(to: path)
            guard descriptor >= 0 else { return (0, true, 0) }
            defer { close(descriptor) }
            guard ControlRawSocket.send(descriptor, request) == request.count else { return (0, true, 0) }
            var replies = 0
            var pauses = 0
            var chunk = [UInt8](repeating: 0, count: 65536)
            let start = ContinuousClock.now
            while replies < 4, ContinuousClock.now - start < .seconds(120) {
                let burst = ContinuousClock.now
                while ContinuousClock.now - burst < .milliseconds(50) {
                    let count = chunk.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress!, $0.count, Int32(MSG_DONTWAIT)) }
                    if count == 0 { return (replies, true, pauses) }
                    if count < 0 {
                        guard errno == EAGAIN || errno == EINTR else { return (replies, true, pauses) }
                        usleep(1_000)
                        continue
                    }
                    replies += chunk[0..<count].filter { $0 == UInt8(ascii: "\n") }.count
                }
                usleep(300_000)
                pauses += 1
            }
            return (replies, false, pauses)
        }
        #expect(run.replies == 4 && !run.closed, "\(run); log: \(fixture.log.lines)")
        #expect(run.pauses >= 1, "read everything in one burst: the test proved nothing")
        #expect(fixture.server.metrics.slowReaderDisconnects == 0)
        await fixture.stop()
    }
}

/// Replies decided when their line was read (`too_many_requests` past the pending limit) pile
/// up behind a slow request until they reach the backpressure mark: a client that reads must
/// still get them all and not be taken for a slow reader.
@Suite("Control socket: backpressure on held replies", .timeLimit(.minutes(5)), .offThePool)
struct ControlHeldReplyTests {
    /// A 1 MiB output limit: the mark (512 KiB) is reached by ~5,000 `too_many_requests`
    /// replies. Not less: the lines of one read (up to 64 KiB, ~3,000 of these) are all answered
    /// before reads are held, and their replies must fit in the other half.
    static let limit = 1024 * 1024
    static let lines = 10_000

    @Test("a reading client that pipelines 10,000 lines behind a slow request, past the pending limit and the backpressure mark, gets every reply in order and is not disconnected, even when the request outlasts the slow-reader timeout")
    func readerBehindSlowRequestGetsEveryReply() async throws {
        let folder = try ControlTestFolder()
        // 3 s, not less: with the whole suite running on two cores, a client that reads can be
        // off the CPU for over a second, and then the server rightly takes it for a slow reader
        // (15 s under a sanitizer, whose slower loop can spend seconds making replies).
        let timeout = Duration.seconds(3 * Sanitizer.slowdown)
        let fixture = try await ControlTestServer.start(
            at: folder.socketPath, limits: ControlLimits(maxQueuedOutputBytes: Self.limit, slowReaderTimeout: timeout))
        let client = try await fixture.connect()
        var text = #"{"id":0,"cmd":"slow"}"# + "\n"
        for id in 1...Self.lines { text += #"{"id":\#(id),"cmd":"ping"}"# + "\n" }
        // Not awaited: once the server holds its reads, the rest stays in the client's buffers.
        let sending = Task { try await client.sendRaw(ByteBuffer(string: text)) }
        #expect(await eventually { fixture.gate.waiting == 1 })
        // The held replies reach the mark while the request runs.
        #expect(await eventually { fixture.server.metrics.largestQueuedOutputBytes >= Self.limit / 2 })
        // The slow request outlasts the slow-reader timeout. Not a synchronisation: what is
        // checked is that nothing happens in this time.
        try await Task.sleep(for: timeout * 2)
        fixture.gate.open()
        for id in 0...Self.lines {
            guard let reply = try? await client.nextValue() else {
                Issue.record("no reply \(id); log: \(fixture.log.lines)")
                break
            }
            guard reply["id"] == JSONValue(id) else {
                Issue.record("reply \(id): \(reply); log: \(fixture.log.lines)")
                break
            }
        }
        try await sending.value
        #expect(fixture.server.metrics.slowReaderDisconnects == 0)
        #expect(try await client.request(#"{"id":"after","cmd":"ping"}"#)["ok"] == true)
        await client.close()
        await fixture.stop()
    }
}
