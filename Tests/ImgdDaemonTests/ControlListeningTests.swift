import Logging
import Foundation
@testable import ImgdDaemon
import ImgdProtocol
import ImgdTestSupport
import NIOCore
import Synchronization
import Testing

@Suite("Control socket: the socket file, inherited sockets, stopping", .timeLimit(.minutes(5)), .offThePool)
struct ControlListeningTests {
    private func fileMode(of path: String) -> mode_t? {
        var status = stat()
        guard lstat(path, &status) == 0 else { return nil }
        return status.st_mode
    }

    @Test("the socket file is a socket with mode 0660, removed at stop")
    func socketFile() async throws {
        let folder = try ControlTestFolder()
        let fixture = try await ControlTestServer.start(at: folder.socketPath)
        let mode = try #require(fileMode(of: folder.socketPath))
        #expect(mode & S_IFMT == S_IFSOCK)
        #expect(mode & 0o7777 == 0o660)
        await fixture.stop()
        #expect(fileMode(of: folder.socketPath) == nil)
    }

    @Test("the socket is bound under a private name and moved into place with its mode: no moment at the path with the umask's mode, nothing left beside it")
    func boundThenMoved() async throws {
        let folder = try ControlTestFolder()
        let staging = try #require(ControlSocketFile.stagingPath(for: folder.socketPath))
        let directory = (folder.socketPath as NSString).deletingLastPathComponent
        #expect((staging as NSString).deletingLastPathComponent == directory)
        #expect((staging as NSString).lastPathComponent == ".imgd-\(getpid()).bind")
        // A leftover of a crashed start under the private name does not stop the next one.
        #expect(FileManager.default.createFile(atPath: staging, contents: Data("x".utf8)))
        let previous = umask(0o002)
        defer { umask(previous) }
        let fixture = try await ControlTestServer.start(at: folder.socketPath)
        #expect(fileMode(of: folder.socketPath).map { $0 & 0o7777 } == 0o660)
        #expect(fileMode(of: staging) == nil)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasSuffix(".bind") }.isEmpty)
        await fixture.stop()
        // A path too long for a sibling name is bound in place.
        let long = "/tmp/" + String(repeating: "d", count: 90) + "/s"
        #expect(ControlSocketFile.stagingPath(for: long) == nil)
    }

    @Test("a stale socket file (nothing listening) is replaced")
    func staleSocket() async throws {
        let folder = try ControlTestFolder()
        let descriptor = ControlRawSocket.listen(at: folder.socketPath)
        #expect(descriptor >= 0)
        close(descriptor)
        #expect(fileMode(of: folder.socketPath).map { $0 & S_IFMT } == S_IFSOCK)
        let fixture = try await ControlTestServer.start(at: folder.socketPath)
        let client = try await fixture.connect()
        #expect(try await client.request(#"{"cmd":"ping"}"#)["ok"] == true)
        await client.close()
        await fixture.stop()
    }

    @Test("a live server's socket is not replaced: alreadyRunning, and the first server still answers")
    func liveSocket() async throws {
        let folder = try ControlTestFolder()
        let first = try await ControlTestServer.start(at: folder.socketPath)
        let second = ControlServer(
            listening: .path(folder.socketPath), handler: ControlTestHandler(), events: EventHub(), logger: .discarding)
        do {
            try await second.start()
            Issue.record("the second server started")
        } catch {
            #expect(error == .alreadyRunning(path: folder.socketPath))
            #expect(error.description == "another imgd is listening on \(folder.socketPath)")
        }
        await second.stop()
        let client = try await first.connect()
        #expect(try await client.request(#"{"cmd":"ping"}"#)["ok"] == true)
        await client.close()
        await first.stop()
    }

    @Test("a path that is not a socket is refused and left alone")
    func notASocket() async throws {
        let folder = try ControlTestFolder()
        try Data("keep me".utf8).write(to: URL(fileURLWithPath: folder.socketPath))
        let server = ControlServer(listening: .path(folder.socketPath), handler: ControlTestHandler(), events: EventHub(), logger: .discarding)
        await #expect(throws: ControlServerError.notASocket(path: folder.socketPath)) { try await server.start() }
        #expect(try String(contentsOfFile: folder.socketPath, encoding: .utf8) == "keep me")
        try FileManager.default.removeItem(atPath: folder.socketPath)
        try FileManager.default.createDirectory(atPath: folder.socketPath, withIntermediateDirectories: false)
        let again = ControlServer(listening: .path(folder.socketPath), handler: ControlTestHandler(), events: EventHub(), logger: .discarding)
        await #expect(throws: ControlServerError.notASocket(path: folder.socketPath)) { try await again.start() }
    }

    @Test("a path too long for a socket is refused with a reason")
    func pathTooLong() async throws {
        let folder = try ControlTestFolder()
        let path = folder.path + "/" + String(repeating: "s", count: 120)
        let server = ControlServer(listening: .path(path), handler: ControlTestHandler(), events: EventHub(), logger: .discarding)
        await #expect(throws: ControlServerError.cannotListen(address: path, reason: "the path is longer than 107 bytes")) {
            try await server.start()
        }
    }

    @Test("an inherited listening descriptor (socket activation) is adopted; its file is not removed at stop")
    func inheritedDescriptor() async throws {
        let folder = try ControlTestFolder()
        let descriptor = ControlRawSocket.listen(at: folder.socketPath)
        #expect(descriptor >= 3)
        let server = ControlServer(
            listening: .inheritedDescriptor(descriptor), handler: ControlTestHandler(), events: EventHub(), logger: .discarding)
        try await server.start()
        let client = try await ControlTestClient.connect(to: folder.socketPath)
        #expect(try await client.request(#"{"id":1,"cmd":"ping"}"#) == ["id": 1, "ok": true, "result": ["pong": true]])
        await client.close()
        await server.stop()
        #expect(fileMode(of: folder.socketPath) != nil)
    }

    @Test("stop: the running request finishes, waiting and new ones get shutting_down, subscribers are closed")
    func gracefulStop() async throws {
        let folder = try ControlTestFolder()
        let fixture = try await ControlTestServer.start(at: folder.socketPath)
        let busy = try await fixture.connect()
        let subscriber = try await fixture.connect()
        #expect(try await subscriber.request(#"{"cmd":"subscribe"}"#)["ok"] == true)
        try await busy.send(#"{"id":1,"cmd":"slow"}"#)
        try await busy.send(#"{"id":2,"cmd":"ping"}"#)
        #expect(await eventually(timeout: .seconds(30)) { fixture.gate.waiting == 1 })

        let server = fixture.server
        let stopping = Task { await server.stop() }
        #expect(await subscriber.waitUntilClosed())
        // Sent while stopping: answered shutting_down, in order. (Read before the slow one
        // finishes: once nothing is left to answer, the connection closes.)
        try await busy.send(#"{"id":3,"cmd":"ping"}"#)
        #expect(await eventually(timeout: .seconds(30)) { server.metrics.linesRead == 4 })
        fixture.gate.open()
        #expect(try await busy.nextValue() == ["id": 1, "ok": true, "result": ["slow": true]])
        for id in [2, 3] {
            let reply = try await busy.nextValue()
            #expect(reply["id"] == JSONValue(id))
            #expect(reply["error"]?["code"] == "shutting_down")
        }
        #expect(await busy.waitUntilClosed())
        await stopping.value
        #expect(server.connectionCount == 0)
        #expect(fileMode(of: folder.socketPath) == nil)
        // Nobody listens any more.
        await #expect(throws: (any Error).self) { try await ControlTestClient.connect(to: folder.socketPath) }
    }

    @Test("stop: a request that outlasts the grace period is cancelled and its connection closed")
    func stopDeadline() async throws {
        let folder = try ControlTestFolder()
        let fixture = try await ControlTestServer.start(at: folder.socketPath, limits: ControlLimits(shutdownGracePeriod: .milliseconds(200)))
        let client = try await fixture.connect()
        try await client.send(#"{"id":1,"cmd":"slow"}"#)
        #expect(await eventually(timeout: .seconds(30)) { fixture.gate.waiting == 1 })
        // The gate is never opened: stop can only return by cancelling the request once the
        // grace period is over. (How soon is not asserted: this machine's load would decide.)
        let stopped = Atomic(false)
        let server = fixture.server
        let stopping = Task {
            await server.stop()
            stopped.store(true, ordering: .sequentiallyConsistent)
        }
        guard await eventually(timeout: .seconds(60), { stopped.load(ordering: .sequentiallyConsistent) }) else {
            Issue.record("stop waits for a request that outlasts the grace period")
            return
        }
        await stopping.value
        #expect(await client.waitUntilClosed())
        #expect(await eventually(timeout: .seconds(30)) { fixture.gate.cancellations == 1 })
        #expect(fixture.server.connectionCount == 0)
    }
}
