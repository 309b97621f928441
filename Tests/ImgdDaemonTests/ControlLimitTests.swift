import Foundation
@testable import ImgdDaemon
import ImgdProtocol
import ImgdTestSupport
import NIOCore
import Testing

@Suite("Control socket: limits", .timeLimit(.minutes(5)), .offThePool)
struct ControlLimitTests {
    @Test("a line of exactly 1 MiB is served; one byte more gets line_too_long")
    func lineLimitBoundary() async throws {
        let folder = try ControlTestFolder()
        let fixture = try await ControlTestServer.start(at: folder.socketPath)
        let limit = ControlLimits().maxLineBytes
        #expect(limit == 1_048_576)
        let head = #"{"id":1,"cmd":"ping","pad":""#
        let tail = #""}"#
        let exact = head + String(repeating: "x", count: limit - head.utf8.count - tail.utf8.count) + tail
        #expect(exact.utf8.count == limit)

        let client = try await fixture.connect()
        try await client.sendRaw(ByteBuffer(string: exact + "\r\n"))
        #expect(try await client.nextValue()["ok"] == true)

        let over = head + "x" + String(exact.dropFirst(head.utf8.count))
        try await client.send(over)
        #expect(try await client.nextLine() == #"{"error":{"code":"line_too_long","message":"a line over 1048576 bytes; closing the connection"},"id":null,"ok":false}"#)
        #expect(await client.waitUntilClosed())
        await fixture.stop()
    }

    @Test("a 10 MiB line: line_too_long with id null, then closed, never more than 1 MiB and a read buffered")
    func tenMebibyteLine() async throws {
        let folder = try ControlTestFolder()
        let fixture = try await ControlTestServer.start(at: folder.socketPath)
        let path = folder.socketPath
        let received = await onOwnThread { () -> [UInt8]? in
            let descriptor = ControlRawSocket.connect(to: path)
            guard descriptor >= 0 else { return nil }
            defer { close(descriptor) }
            var line = [UInt8](#"{"id":5,"cmd":"ping","pad":""#.utf8)
            line.append(contentsOf: repeatElement(UInt8(ascii: "x"), count: 10 << 20))
            line.append(contentsOf: Array("\"}\n".utf8))
            _ = ControlRawSocket.send(descriptor, line)
            return ControlRawSocket.receiveAll(descriptor)
        }
        let reply = try #require(received)
        let text = String(decoding: reply, as: UTF8.self)
        #expect(text == "{\"error\":{\"code\":\"line_too_long\",\"message\":\"a line over 1048576 bytes; closing the connection\"},\"id\":null,\"ok\":false}\n")
        let metrics = fixture.server.metrics
        #expect(metrics.linesTooLong == 1)
        #expect(metrics.largestInputBuffer <= 1_048_576 + 1 + 65_536, "buffered \(metrics.largestInputBuffer) bytes")
        #expect(await eventually(timeout: .seconds(30)) { fixture.server.connectionCount == 0 })
        #expect(fixture.log.lines.count == 1)
        #expect(fixture.log.lines.first?.contains("pid \(getpid()) uid \(getuid())") == true)
        #expect(fixture.log.lines.first?.contains("line over 1048576 bytes") == true)
        await fixture.stop()
    }

    @Test("more than 64 waiting requests: the excess gets too_many_requests, in order, and is not run")
    func tooManyRequests() async throws {
        let folder = try ControlTestFolder()
        let fixture = try await ControlTestServer.start(at: folder.socketPath)
        let client = try await fixture.connect()
        // All in one write, so the server reads them all before the first can finish.
        let lines = (0..<70).map { "{\"id\":\($0),\"cmd\":\"slow\"}\n" }.joined()
        try await client.sendRaw(ByteBuffer(string: lines))
        #expect(await eventually(timeout: .seconds(30)) { fixture.gate.waiting == 1 })
        fixture.gate.open()
        for index in 0..<70 {
            let reply = try await client.nextValue()
            #expect(reply["id"] == JSONValue(index))
            if index < 64 {
                #expect(reply["result"] == ["slow": true], "reply \(index)")
            } else {
                #expect(reply["error"]?["code"] == "too_many_requests", "reply \(index)")
            }
        }
        // Still usable.
        #expect(try await client.request(#"{"id":"after","cmd":"ping"}"#)["ok"] == true)
        await client.close()
        await fixture.stop()
    }

    @Test("a client that never reads is disconnected at 4 MiB queued; another client is unaffected")
    func slowReader() async throws {
        let folder = try ControlTestFolder()
        let fixture = try await ControlTestServer.start(at: folder.socketPath)
        let stalled = try await fixture.connect(reading: false)
        let other = try await fixture.connect()
        let reply = 256 * 1024
        let lines = (0..<60).map { "{\"id\":\($0),\"cmd\":\"big\",\"bytes\":\(reply)}\n" }.joined()
        try await stalled.sendRaw(ByteBuffer(string: lines))
        #expect(await eventually(timeout: .seconds(30)) { fixture.server.metrics.slowReaderDisconnects == 1 })
        #expect(await eventually(timeout: .seconds(30)) { fixture.server.connectionCount == 1 })
        #expect(try await other.request(#"{"id":1,"cmd":"ping"}"#)["ok"] == true)
        let largest = fixture.server.metrics.largestQueuedOutputBytes
        #expect(largest <= 4 * 1_048_576, "queued \(largest) bytes")
        #expect(fixture.log.lines.filter { $0.contains("does not read") }.count == 1)
        #expect(fixture.log.lines.first?.contains("pid \(getpid())") == true)
        await stalled.close()
        await other.close()
        await fixture.stop()
    }

    @Test("1,000 connections at once with the limit at 1,000: every one is answered")
    func thousandConnections() async throws {
        raiseOpenFileLimit()
        let folder = try ControlTestFolder()
        // All from this process's uid: no per-uid cap or reserve in the way (ControlFairnessTests
        // and the daemon's SocketFairnessTests cover those).
        let fixture = try await ControlTestServer.start(
            at: folder.socketPath, limits: ControlLimits(maxConnections: 1000, maxConnectionsPerPeer: 1000, reservedConnections: 0))
        let clients = try await withThrowingTaskGroup(of: ControlTestClient.self) { group in
            for _ in 0..<1000 {
                group.addTask { try await fixture.connect() }
            }
            var clients: [ControlTestClient] = []
            for try await client in group { clients.append(client) }
            return clients
        }
        // Send every request, then wait for all the replies (one poller, not a thousand).
        for (index, client) in clients.enumerated() {
            try await client.send("{\"id\":\(index),\"cmd\":\"ping\"}")
        }
        #expect(await eventually(timeout: .seconds(30)) { clients.allSatisfy { $0.inbox.hasLine } })
        var answered = 0
        for (index, client) in clients.enumerated() where try await client.nextValue()["id"] == JSONValue(index) {
            answered += 1
        }
        #expect(answered == 1000)
        #expect(fixture.server.connectionCount == 1000)
        #expect(fixture.server.metrics.busyRefusals == 0)
        for client in clients { await client.close() }
        #expect(await eventually(timeout: .seconds(30)) { fixture.server.connectionCount == 0 })
        await fixture.stop()
    }

    @Test("with the default total limit of 256, the 257th connection gets busy and is closed")
    func busy() async throws {
        raiseOpenFileLimit()
        let folder = try ControlTestFolder()
        // All from this process's uid: the per-uid cap and the reserve are lifted, the total stays the default.
        let limits = ControlLimits(maxConnectionsPerPeer: 256, reservedConnections: 0)
        #expect(limits.maxConnections == 256)
        let fixture = try await ControlTestServer.start(at: folder.socketPath, limits: limits)
        var clients: [ControlTestClient] = []
        for index in 0..<256 {
            let client = try await fixture.connect()
            try await client.send("{\"id\":\(index),\"cmd\":\"ping\"}")
            clients.append(client)
        }
        #expect(await eventually(timeout: .seconds(30)) { clients.allSatisfy { $0.inbox.hasLine } })
        for client in clients {
            #expect(try await client.nextValue()["ok"] == true)
        }
        #expect(fixture.server.connectionCount == 256)
        let refused = try await fixture.connect()
        #expect(try await refused.nextLine() == #"{"error":{"code":"busy","message":"too many connections (256); try again later"},"id":null,"ok":false}"#)
        #expect(await refused.waitUntilClosed())
        #expect(fixture.server.connectionCount == 256)
        #expect(fixture.log.lines.count == 1)
        #expect(fixture.log.lines.first?.contains("pid \(getpid()) uid \(getuid())") == true)
        // One leaves; the next is served.
        await clients.removeLast().close()
        #expect(await eventually(timeout: .seconds(30)) { fixture.server.connectionCount == 255 })
        let next = try await fixture.connect()
        #expect(try await next.request(#"{"cmd":"ping"}"#)["ok"] == true)
        clients.append(next)
        for client in clients { await client.close() }
        await fixture.stop()
    }

    @Test("an idle connection is closed after the idle timeout; a subscribed one is not")
    func idleTimeout() async throws {
        let folder = try ControlTestFolder()
        let fixture = try await ControlTestServer.start(at: folder.socketPath, limits: ControlLimits(idleTimeout: .seconds(1)))
        let (subscriber, _) = try await connectBeforeIdle(fixture, #"{"cmd":"subscribe"}"#)
        let (idle, started) = try await connectBeforeIdle(fixture, #"{"cmd":"ping"}"#)
        #expect(await idle.waitUntilClosed(timeout: .seconds(30)))
        #expect(ContinuousClock.now - started >= .seconds(1))
        // The subscriber was quiet for longer than the idle one, and is still served.
        #expect(!subscriber.inbox.isClosed)
        fixture.events.publish("fetched", data: ["url": "u"])
        #expect(try await subscriber.nextValue()["event"] == "fetched")
        // The client sees the close as soon as the descriptor is closed; the server lets go of
        // the connection in the close's callback on its loop, an instant later.
        #expect(await eventually(timeout: .seconds(10)) { fixture.server.connectionCount == 1 })
        await subscriber.close()
        await fixture.stop()
    }

    @Test("a connection that keeps asking outlives the idle timeout; once quiet for it, it is closed")
    func idleTimeoutCountsFromTheLastReply() async throws {
        let folder = try ControlTestFolder()
        // 3 s; 15 s under a sanitizer, whose slower server loop can take seconds to read a request.
        let timeout = Duration.seconds(3 * Sanitizer.slowdown)
        let fixture = try await ControlTestServer.start(at: folder.socketPath, limits: ControlLimits(idleTimeout: timeout))
        let path = folder.socketPath
        // A blocking client on a thread of its own, so its pace does not depend on the test
        // pool: requests 200 ms apart for over twice the timeout (the timer set at the accept
        // fires while the connection is in use, and must look again rather than close it), then
        // silence until the server closes.
        let run = await onOwnThread { () -> (answered: Int, closedWhileAsking: Bool, quietBeforeClose: Duration?) in
            let descriptor = ControlRawSocket.connect(to: path)
            guard descriptor >= 0 else { return (0, true, nil) }
            defer { close(descriptor) }
            let start = ContinuousClock.now
            var answered = 0
            var lastSent = start
            // At least 7/3 of the timeout and 20 answers: on a loaded machine a reply can take
            // longer than the pause, and the test is about the asking, not the pace (at most 10
            // timeouts).
            while ContinuousClock.now - start < timeout * 7 / 3 || (answered < 20 && ContinuousClock.now - start < timeout * 10) {
                lastSent = .now
                guard ControlRawSocket.send(descriptor, Array("{\"cmd\":\"quick\"}\n".utf8)) > 0,
                    ControlRawSocket.readLine(descriptor)?.contains("\"ok\":true") == true
                else { return (answered, true, nil) }
                answered += 1
                usleep(200_000)
            }
            // Silence: the next read ends when the server closes (or gives up after 27 s more).
            let deadline = ContinuousClock.now + timeout + .seconds(27)
            while ContinuousClock.now < deadline {
                var byte: UInt8 = 0
                let got = recv(descriptor, &byte, 1, 0)
                if got == 0 { return (answered, false, ContinuousClock.now - lastSent) }
                if got < 0, errno != EAGAIN, errno != EINTR { return (answered, false, nil) }
            }
            return (answered, false, nil)
        }
        #expect(!run.closedWhileAsking, "closed after \(run.answered) answered requests, 200 ms apart")
        #expect(run.answered >= 20)
        let quiet = try #require(run.quietBeforeClose, "not closed within \(timeout + .seconds(27)) of silence")
        // Quiet from the last reply, which the server wrote after the last request was sent.
        #expect(quiet >= timeout)
        await fixture.stop()
    }

    /// Connects and sends `request`, returning the connection and when the request was sent.
    /// The idle timer runs from the accept, so on a machine too loaded to send the request within
    /// the timeout the server rightly closes the connection first: then this tries again.
    private func connectBeforeIdle(
        _ fixture: ControlTestServer, _ request: String
    ) async throws -> (ControlTestClient, ContinuousClock.Instant) {
        for _ in 0..<10 {
            let client = try await fixture.connect()
            let sent = ContinuousClock.now
            if let reply = try? await client.request(request) {
                #expect(reply["ok"] == true)
                return (client, sent)
            }
            #expect(client.inbox.isClosed)
            await client.close()
        }
        throw ControlTestClient.Failure(description: "every connection was closed before its first request")
    }
}
