import Foundation
import ImgdTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Who may run what (Protocol.md, *Who may run what*), against the real daemon, with a second
/// uid: `imgctl` run as uid 65534 through setpriv (``OtherUser``), a plain member of the socket's
/// group or one also in `admin-group`, beside root (the test process).
@Suite(
    "Peers: destructive commands for root, imgd and admin-group only; the rest open",
    .enabled(if: OtherUser.available, "needs root and util-linux's setpriv to run imgctl as a second uid"),
    .timeLimit(.minutes(10)), .offThePool)
struct PeerAccessTests {
    /// A daemon whose socket group 65534 may use, with `admin-group` set to a group of this
    /// machine (returned with it).
    private static func start(in scratch: ScratchFolder, arguments: [String] = []) async throws
        -> (daemon: DaemonProcess, admin: (name: String, gid: UInt32))
    {
        let admin = try #require(OtherUser.existingGroup(["adm", "daemon", "sys"]), "no group adm, daemon or sys here")
        chmod(scratch.path, 0o755)
        let socket = scratch.path + "/imgd.sock"
        let daemon = try await DaemonProcess.start(
            in: scratch.path, arguments: ["--socket", socket, "--admin-group", admin.name] + arguments, socket: socket)
        try OtherUser.share(socket)
        return (daemon, admin)
    }

    @Test(
        "purge --disk, evict, fsck, retry of everything: forbidden to a plain member, allowed to a member of admin-group and to root",
        arguments: [["purge", "--disk"], ["evict", "http://127.0.0.1:9/x.png"], ["fsck"], ["retry"]])
    func destructive(_ command: [String]) async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let (daemon, admin) = try await Self.start(in: scratch)

        let plain = try await OtherUser.plain.imgctl(command, socket: daemon.socket)
        #expect(plain.status == 1, "exit \(plain.status): \(plain.stdout)\(plain.stderr)")
        #expect(plain.stderr.contains("imgctl: forbidden: "), "\(plain.stderr)")
        #expect(plain.stderr.contains("admin-group \(admin.name) (gid \(admin.gid))"), "the message names what is needed: \(plain.stderr)")
        #expect(plain.stderr.contains("uid 65534 is none of these"), "\(plain.stderr)")
        #expect(daemon.log.contains(#"forbidden peer="pid "#), "the refusal is logged with the peer: \(daemon.log)")

        let member = try await OtherUser.member(of: admin.gid).imgctl(command, socket: daemon.socket)
        #expect(member.status == 0, "exit \(member.status): \(member.stdout)\(member.stderr)")

        let request: String = switch command[0] {
        case "purge": #"{"cmd":"purge","tier":"disk"}"#
        case "evict": #"{"cmd":"evict","urls":["http://127.0.0.1:9/x.png"]}"#
        case "fsck": #"{"cmd":"fsck"}"#
        default: #"{"cmd":"retry"}"#
        }
        _ = try await daemon.result(request)
        #expect(await daemon.stop() == 0, "log:\n\(daemon.log)")
    }

    @Test("the daemon's own user: a daemon running as uid 65534 lets uid 65534 (no admin-group) run fsck and purge --disk")
    func daemonsOwnUser() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try #require(chown(scratch.path, OtherUser.uid, OtherUser.gid) == 0)
        let socket = scratch.path + "/imgd.sock"
        let daemon = try await DaemonProcess.start(
            in: scratch.path, arguments: ["--socket", socket], socket: socket,
            launcher: [OtherUser.setpriv, "--reuid=\(OtherUser.uid)", "--regid=\(OtherUser.gid)", "--clear-groups", "--"])
        for command in [["fsck"], ["purge", "--disk"]] {
            let run = try await OtherUser.plain.imgctl(command, socket: socket)
            #expect(run.status == 0, "\(command): exit \(run.status): \(run.stderr)")
        }
        #expect(await daemon.stop() == 0, "log:\n\(daemon.log)")
    }

    @Test("purge --memory, get, status, lists, stats: open to a plain member")
    func openCommands() async throws {
        let server = try await TestHTTPServer.start()
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let (daemon, _) = try await Self.start(in: scratch)
        for command in [["purge", "--memory"], ["get", server.url("/img/member.png")], ["status"], ["lists"], ["stats"]] {
            let run = try await OtherUser.plain.imgctl(command, socket: daemon.socket)
            #expect(run.status == 0, "\(command): exit \(run.status): \(run.stdout)\(run.stderr)")
        }
        #expect(await daemon.stop() == 0, "log:\n\(daemon.log)")
        try await server.shutdown()
    }

    @Test("cancel --list: one's own list allowed; another user's forbidden, then allowed to admin-group and root")
    func cancelLists() async throws {
        let server = try await TestHTTPServer.start()
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let (daemon, admin) = try await Self.start(in: scratch)
        // Lists whose images are held at the origin, so each stays active until cancelled: one
        // dropped by uid 65534, two by root.
        func drop(_ name: String, owner: uid_t) throws {
            let targets = (0..<3).map { server.url("/img/\(name)-\($0).png?gate=held") }
            let temp = daemon.spool + "/." + name + ".tmp"
            try Data((targets.joined(separator: "\n") + "\n").utf8).write(to: URL(fileURLWithPath: temp))
            try #require(chown(temp, owner, OtherUser.gid) == 0)
            try #require(rename(temp, daemon.spool + "/" + name) == 0)
        }
        try drop("mine.txt", owner: OtherUser.uid)
        try drop("roots.txt", owner: 0)
        try drop("roots2.txt", owner: 0)
        for name in ["mine.txt", "roots.txt", "roots2.txt"] {
            let active = await eventually(timeout: .seconds(30)) { try await daemon.list(name)?["state"] as? String == "active" }
            try #require(active, "\(name) is not active: \(daemon.log)")
        }

        let others = try await OtherUser.plain.imgctl(["cancel", "--list", "roots.txt"], socket: daemon.socket)
        #expect(others.status == 1, "exit \(others.status): \(others.stderr)")
        #expect(others.stderr.contains("imgctl: forbidden: list roots.txt was dropped by uid 0"), "\(others.stderr)")
        #expect(try await daemon.list("roots.txt")?["state"] as? String == "active", "a refused cancel changed nothing")

        let own = try await OtherUser.plain.imgctl(["cancel", "--list", "mine.txt"], socket: daemon.socket)
        #expect(own.status == 0, "exit \(own.status): \(own.stderr)")
        #expect(await daemon.finishedList("mine.txt")?["state"] as? String == "cancelled")

        let member = try await OtherUser.member(of: admin.gid).imgctl(["cancel", "--list", "roots.txt"], socket: daemon.socket)
        #expect(member.status == 0, "exit \(member.status): \(member.stderr)")
        #expect(await daemon.finishedList("roots.txt")?["state"] as? String == "cancelled")

        _ = try await daemon.result(#"{"cmd":"cancel","list":"roots2.txt"}"#)
        #expect(await daemon.finishedList("roots2.txt")?["state"] as? String == "cancelled")
        server.openGate("held")
        #expect(await daemon.stop() == 0, "log:\n\(daemon.log)")
        try await server.shutdown()
    }

    @Test("cancel --list of another user's list still being claimed: forbidden to a plain member, and the claim goes on")
    func cancelClaimingList() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let (daemon, _) = try await Self.start(in: scratch)
        // A million lines, dropped by root: seconds of claiming in a debug build.
        try await daemon.dropNumberedURLs("long.txt", count: 1_000_000)
        let claiming = await eventually(timeout: .seconds(20)) {
            (try await daemon.list("long.txt")?["total"] as? Int ?? 0) > 0
        }
        try #require(claiming, "log: \(daemon.log)")
        try #require(try await daemon.list("long.txt")?["state"] as? String == "claiming", "the claim ended before the test could ask")

        let refused = try await OtherUser.plain.imgctl(["cancel", "--list", "long.txt"], socket: daemon.socket)
        #expect(refused.status == 1, "exit \(refused.status): \(refused.stderr)")
        #expect(refused.stderr.contains("imgctl: forbidden: list long.txt was dropped by uid 0"), "\(refused.stderr)")
        // Not cancelled: the whole list is claimed and becomes active (or already finishing). Waited
        // for as long as the claim makes progress: on a loaded machine a million lines can take
        // minutes in a debug build; a claim that stops still fails.
        let whole = await eventuallyWhileProgressing {
            let list = try await daemon.list("long.txt")
            let total = list?["total"] as? Int ?? 0
            return (total, list?["state"] as? String != "claiming" && total == 1_000_000)
        }
        let list = try await daemon.list("long.txt")
        #expect(whole, "lists: \(String(describing: list)) log: \(daemon.log)")
        #expect(list?["state"] as? String != "cancelled")
        #expect(await daemon.stop() == 0, "log:\n\(daemon.log)")
    }
}
