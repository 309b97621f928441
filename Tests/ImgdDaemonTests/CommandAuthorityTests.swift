import Foundation
import ImgdTestSupport
@testable import ImgdDaemon
import Testing

/// Who may run the destructive commands (``CommandAuthority``), and the `admin-group` setting
/// it reads. The daemon-level behaviour, with a real second uid, is in PeerAccessTests.
@Suite("Command authority: root, the daemon's user and admin-group members; nobody else", .offThePool)
struct CommandAuthorityTests {
    static let admin = AdminGroup(name: "imgd-admin", gid: 1500)
    static let authority = CommandAuthority(adminGroup: admin, daemonUID: 990)

    static func peer(uid: UInt32, gid: UInt32 = 1000, groups: [UInt32] = []) -> ControlPeer {
        ControlPeer(pid: 42, uid: uid, gid: gid, groups: groups)
    }

    @Test("allowed: root, the daemon's uid, admin-group as primary or supplementary group")
    func allowed() {
        #expect(Self.authority.isPrivileged(Self.peer(uid: 0)))
        #expect(Self.authority.isPrivileged(Self.peer(uid: 990)))
        #expect(Self.authority.isPrivileged(Self.peer(uid: 1000, gid: 1500)))
        #expect(Self.authority.isPrivileged(Self.peer(uid: 1000, groups: [27, 1500, 2000])))
    }

    @Test("refused: another user, an unknown peer, anyone but root and imgd when no admin-group is set")
    func refused() throws {
        #expect(!Self.authority.isPrivileged(Self.peer(uid: 1000, groups: [27, 1499, 1501])))
        #expect(!Self.authority.isPrivileged(.unknown))
        let none = CommandAuthority(adminGroup: nil, daemonUID: 990)
        #expect(!none.isPrivileged(Self.peer(uid: 1000, gid: 1500)))
        #expect(none.isPrivileged(Self.peer(uid: 990)))
        let error = try #require(throws: ControlError.self) { try Self.authority.require(Self.peer(uid: 1000), for: "fsck") }
        #expect(error.code == "forbidden")
        #expect(error.message == "fsck is allowed only to root, imgd's own user (uid 990) and members of admin-group imgd-admin (gid 1500); uid 1000 is none of these")
    }

    @Test("admin-group: a name is resolved to its gid when loaded; an unknown name is refused; empty means none")
    func setting() throws {
        var config = DaemonConfig(spool: "/s", cache: "/c", state: "/t", socket: "/k")
        try config.set("admin-group", to: .string("root"), origin: "--admin-group")
        #expect(config.adminGroup == AdminGroup(name: "root", gid: 0))
        try config.set("admin-group", to: .string(""), origin: "--admin-group")
        #expect(config.adminGroup == nil)
        let error = try #require(throws: ConfigError.self) {
            try config.set("admin-group", to: .string("no-such-group-imgd"), origin: "--admin-group")
        }
        #expect("\(error)".contains("no group named no-such-group-imgd"), "\(error)")
    }
}
