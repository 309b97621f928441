#if canImport(Glibc)
import Glibc
#endif

/// Who may run the destructive commands (Protocol.md, *Who may run what*): `purge` of the disk
/// tier, `evict`, `fsck`, `reload`, `retry` of every remembered failure, and `cancel` of a list
/// another user dropped. They are allowed to root, to the daemon's own user and to members of
/// `admin-group`; anyone else gets `forbidden`. Every other command is open to whoever can
/// connect (the socket's group).
///
/// Membership is judged on the groups the kernel recorded when the peer connected
/// (`SO_PEERCRED`'s gid and `SO_PEERGROUPS`, see ``ControlPeerCredentials``): they are the
/// groups the process really had, cannot be raced by a reused pid as `/proc/PID/status` can,
/// and need no `/proc` access (the unit's `ProtectProc=invisible` hides other users'
/// processes). A user added to the group counts from their next login, as for file access.
struct CommandAuthority: Sendable {
    /// The daemon's own uid.
    let daemonUID: UInt32
    let adminGroup: AdminGroup?

    init(adminGroup: AdminGroup?, daemonUID: UInt32 = getuid()) {
        self.daemonUID = daemonUID
        self.adminGroup = adminGroup
    }

    /// Whether `peer` may run the destructive commands.
    func isPrivileged(_ peer: ControlPeer) -> Bool {
        guard peer != .unknown else { return false }
        if peer.uid == 0 || peer.uid == daemonUID { return true }
        guard let adminGroup else { return false }
        return peer.isMember(of: adminGroup.gid)
    }

    /// Throws `forbidden` unless `peer` may run the destructive command `what` ("evict").
    func require(_ peer: ControlPeer, for what: String) throws(ControlError) {
        guard !isPrivileged(peer) else { return }
        throw .forbidden("\(what) is allowed only to \(allowed); \(Self.describe(peer)) is none of these")
    }

    /// Who is allowed, for messages.
    var allowed: String {
        let group = adminGroup.map { "members of admin-group \($0.name) (gid \($0.gid))" } ?? "members of admin-group (none is set)"
        return "root, imgd's own user (uid \(daemonUID)) and \(group)"
    }

    static func describe(_ peer: ControlPeer) -> String {
        peer == .unknown ? "a peer whose credentials could not be read" : "uid \(peer.uid)"
    }
}
