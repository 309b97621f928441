import Foundation
import ImgdTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The control socket is fair (Protocol.md, *Limits*): one uid cannot hold more than
/// `max-connections-per-peer` connections, nor the last connections of `max-connections`, which
/// are kept for users with none open. Root (the test process) fills its share with idle
/// subscribers; a second uid (``OtherUser``) is still served.
@Suite(
    "Socket fairness: a per-uid cap and a reserve for users with no connection",
    .enabled(if: OtherUser.available, "needs root and util-linux's setpriv to run imgctl as a second uid"),
    .timeLimit(.minutes(10)), .offThePool)
struct SocketFairnessTests {
    private static func start(in scratch: ScratchFolder, arguments: [String]) async throws -> DaemonProcess {
        chmod(scratch.path, 0o755)
        let socket = scratch.path + "/imgd.sock"
        let daemon = try await DaemonProcess.start(in: scratch.path, arguments: ["--socket", socket] + arguments, socket: socket)
        try OtherUser.share(socket)
        return daemon
    }

    /// An idle subscriber, retried while the connections that started the daemon (its `ping`s)
    /// are still being closed on its side.
    private static func subscriber(_ daemon: DaemonProcess) async throws -> EventSubscription {
        var made: EventSubscription?
        _ = await eventually(timeout: .seconds(10)) {
            made = try await daemon.subscribe()
            return true
        }
        return try #require(made, "could not subscribe: \(daemon.log)")
    }

    /// The line the daemon sends a connection it refuses, on a new connection of this process.
    private static func refusal(_ daemon: DaemonProcess) async throws -> String {
        let socket = daemon.socket
        return try await onOwnThread { Result { try ControlClient(path: socket).readLine() } }.get()
    }

    @Test("one uid at its cap of idle subscribers: its next connection gets busy naming the cap; another uid is served; after one closes it connects again")
    func perPeerCap() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let daemon = try await Self.start(in: scratch, arguments: ["--max-connections", "16", "--max-connections-per-peer", "4"])
        var subscribers: [EventSubscription] = []
        for _ in 0..<4 { subscribers.append(try await Self.subscriber(daemon)) }

        let refused = try await Self.refusal(daemon)
        #expect(refused.contains(#""code":"busy""#), "\(refused)")
        #expect(refused.contains("uid 0 already has 4 connections open") && refused.contains("max-connections-per-peer"), "\(refused)")
        #expect(daemon.log.contains(#"refused a connection: "#) && daemon.log.contains(#"(busy) peer="pid "#), "\(daemon.log)")

        let other = try await OtherUser.plain.imgctl(["status"], socket: daemon.socket)
        #expect(other.status == 0, "the second uid is not served: exit \(other.status): \(other.stderr)")

        subscribers.removeLast().close()
        subscribers.append(try await Self.subscriber(daemon))
        for subscriber in subscribers { subscriber.close() }
        #expect(await daemon.stop() == 0, "log:\n\(daemon.log)")
    }

    @Test("the reserve: a uid with connections cannot take the last of max-connections; a uid with none can")
    func reserve() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        // 8 connections, the last 1 (an eighth) kept for users with none open; no per-uid cap in the way.
        let daemon = try await Self.start(in: scratch, arguments: ["--max-connections", "8", "--max-connections-per-peer", "32"])
        var subscribers: [EventSubscription] = []
        for _ in 0..<7 { subscribers.append(try await Self.subscriber(daemon)) }

        let refused = try await Self.refusal(daemon)
        #expect(refused.contains(#""code":"busy""#), "\(refused)")
        #expect(refused.contains("the last 1 of 8 are kept for users with no connection open"), "\(refused)")

        let other = try await OtherUser.plain.imgctl(["status"], socket: daemon.socket)
        #expect(other.status == 0, "the uid with no connection is not served: exit \(other.status): \(other.stderr)")

        subscribers.removeLast().close()
        subscribers.append(try await Self.subscriber(daemon))
        for subscriber in subscribers { subscriber.close() }
        #expect(await daemon.stop() == 0, "log:\n\(daemon.log)")
    }
}
