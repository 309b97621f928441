import Foundation
import ImgdTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `--max-connections` as a total (Protocol.md, *Limits*): once that many connections are open,
/// whoever connects next gets `busy` naming the total, a uid with none open included. Root (the
/// test) fills what it may, up to the reserve; a second uid (``OtherUser``) takes the reserve.
@Suite(
    "imgd: --max-connections is a total no uid passes (the real binary)",
    .enabled(if: OtherUser.available, "needs root and util-linux's setpriv to run imgctl as a second uid"),
    .timeLimit(.minutes(10)), .offThePool)
struct DaemonConnectionCapTests {
    @Test("--max-connections 4: root holds 3 (one kept in reserve), a second uid takes the 4th; then both get busy for the total; once it closes, the second uid is served again")
    func total() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        chmod(scratch.path, 0o755)
        let socket = scratch.path + "/imgd.sock"
        let daemon = try await DaemonProcess.start(
            in: scratch.path, arguments: ["--socket", socket, "--max-connections", "4", "--max-connections-per-peer", "32"], socket: socket)
        defer { if daemon.isRunning { kill(daemon.pid, SIGKILL) } }
        try OtherUser.share(socket)

        // Three idle subscribers of root (retried while the start's pings are still closing).
        var subscribers: [EventSubscription] = []
        for _ in 0..<3 {
            var made: EventSubscription?
            _ = await eventually(timeout: .seconds(10)) {
                made = try await daemon.subscribe()
                return true
            }
            subscribers.append(try #require(made, "could not subscribe: \(daemon.log)"))
        }
        defer { for subscriber in subscribers { subscriber.close() } }
        let reserved = try await Self.refusal(socket)
        #expect(reserved.contains(#""code":"busy""#) && reserved.contains("the last 1 of 4 are kept"), "\(reserved)")

        // The second uid, with none open, takes the last one and keeps it.
        let watcher = try ChildProcess(
            OtherUser.setpriv,
            ["--reuid=\(OtherUser.uid)", "--regid=\(OtherUser.gid)", "--clear-groups", "--", BinaryRunner.imgctlPath, "watch", "--socket", socket],
            in: "/", environment: ["PATH": "/usr/bin:/bin"])
        defer { if watcher.isRunning { kill(watcher.pid, SIGKILL) } }

        // Now all 4 are open: root's next is refused for the total, not for the reserve.
        var refusal = ""
        let full = await eventually(timeout: .seconds(20)) {
            refusal = try await Self.refusal(socket)
            return refusal.contains("too many connections (4)")
        }
        #expect(full, "no busy for the total of 4; last refusal: \(refusal); log:\n\(daemon.log)")
        #expect(refusal.contains(#""code":"busy""#), "\(refusal)")
        #expect(watcher.isRunning, "imgctl watch (the second uid) ended: status \(watcher.status.map(String.init) ?? "-")")
        // And so is a uid with no connection: the reserve is inside the total, not beyond it.
        let other = try await OtherUser.plain.imgctl(["status"], socket: socket)
        #expect(other.status != 0 && other.stderr.contains("too many connections (4)"), "exit \(other.status): \(other.stderr)")

        // The second uid's connection closed: 3 open, and the last is a reserve it may take again.
        watcher.signal(SIGTERM)
        #expect(await watcher.exited(within: .seconds(30)) != nil, "imgctl watch did not stop")
        var served: ChildProcess.Output?
        let again = await eventually(timeout: .seconds(10)) {
            served = try await OtherUser.plain.imgctl(["status"], socket: socket)
            return served?.status == 0
        }
        #expect(again, "the second uid was not served once its connection closed: \(served?.stderr ?? "")")
        #expect(await daemon.stop() == 0, "log:\n\(daemon.log)")
    }

    /// The line the daemon sends a connection it refuses (throws if it serves it: nothing comes).
    private static func refusal(_ socket: String) async throws -> String {
        try await onOwnThread {
            Result {
                let client = try ControlClient(path: socket)
                var timeout = timeval(tv_sec: 5, tv_usec: 0)
                setsockopt(client.fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
                return try client.readLine()
            }
        }.get()
    }
}
