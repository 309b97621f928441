import Foundation
@testable import ImgdDaemon
import ImgdTestSupport
import NIOCore
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The per-uid cap and the reserve of the control server, from one uid (this process): the
/// exact `busy` lines, and that a closed connection frees its place. With a second uid, against
/// the real daemon: SocketFairnessTests.
@Suite("Control socket: the per-uid cap and the reserve", .timeLimit(.minutes(5)), .offThePool)
struct ControlFairnessTests {
    /// `count` connections that each had a ping answered.
    private func served(_ fixture: ControlTestServer, _ count: Int) async throws -> [ControlTestClient] {
        var clients: [ControlTestClient] = []
        for _ in 0..<count {
            let client = try await fixture.connect()
            #expect(try await client.request(#"{"cmd":"ping"}"#)["ok"] == true)
            clients.append(client)
        }
        return clients
    }

    @Test("a uid at max-connections-per-peer: its next connection gets busy naming the cap, and is closed; one closed, it connects again")
    func perPeerCap() async throws {
        let folder = try ControlTestFolder()
        let fixture = try await ControlTestServer.start(at: folder.socketPath, limits: ControlLimits(maxConnections: 16, maxConnectionsPerPeer: 3))
        var clients = try await served(fixture, 3)
        #expect(fixture.server.connectionCount(of: getuid()) == 3)
        let refused = try await fixture.connect()
        #expect(try await refused.nextLine() == #"{"error":{"code":"busy","message":"uid \#(getuid()) already has 3 connections open, the most one user may have (max-connections-per-peer); close one or try again later"},"id":null,"ok":false}"#)
        #expect(await refused.waitUntilClosed())
        #expect(fixture.log.lines.count == 1)
        #expect(fixture.log.lines.first?.contains(#"refused a connection: "#) == true && fixture.log.lines.first?.contains(#"peer="pid \#(getpid()) uid \#(getuid())"#) == true, "\(fixture.log.lines)")

        await clients.removeLast().close()
        #expect(await eventually(timeout: .seconds(30)) { fixture.server.connectionCount(of: getuid()) == 2 })
        clients += try await served(fixture, 1)
        for client in clients { await client.close() }
        await fixture.stop()
    }

    @Test("a uid with connections open cannot take the reserve (the last eighth of max-connections)")
    func reserve() async throws {
        let folder = try ControlTestFolder()
        let limits = ControlLimits(maxConnections: 16, maxConnectionsPerPeer: 100)
        #expect(limits.reservedConnections == 2)
        let fixture = try await ControlTestServer.start(at: folder.socketPath, limits: limits)
        let clients = try await served(fixture, 14)
        let refused = try await fixture.connect()
        #expect(try await refused.nextLine() == #"{"error":{"code":"busy","message":"too many connections: the last 2 of 16 are kept for users with no connection open, and yours has one; close one or try again later"},"id":null,"ok":false}"#)
        #expect(await refused.waitUntilClosed())
        #expect(fixture.server.connectionCount == 14)
        for client in clients { await client.close() }
        await fixture.stop()
    }

    @Test("the reserve by default: an eighth of max-connections, at least 1")
    func reserveSize() {
        #expect(ControlLimits().reservedConnections == 32)
        #expect(ControlLimits(maxConnections: 7).reservedConnections == 1)
        #expect(ControlLimits(maxConnections: 1).reservedConnections == 1)
        #expect(ControlLimits(maxConnections: 100).reservedConnections == 12)
    }
}
