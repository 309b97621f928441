/// The process at the other end of a control connection, as the kernel reported it when the
/// connection was accepted (`SO_PEERCRED`, `SO_PEERGROUPS`). Handlers log it with commands that
/// change state, and decide from it who may run the destructive ones.
public struct ControlPeer: Sendable, Hashable, CustomStringConvertible {
    public let pid: Int32
    public let uid: UInt32
    public let gid: UInt32
    /// Its supplementary groups when it connected (empty when it had none, or more than
    /// ``ControlPeerCredentials/maxGroups``).
    public let groups: [UInt32]

    public init(pid: Int32, uid: UInt32, gid: UInt32, groups: [UInt32] = []) {
        self.pid = pid
        self.uid = uid
        self.gid = gid
        self.groups = groups
    }

    /// Stands for a peer whose credentials could not be read (pid 0, uid and gid -1).
    public static let unknown = ControlPeer(pid: 0, uid: .max, gid: .max)

    /// Whether `gid` is its primary group or one of its supplementary groups.
    public func isMember(of gid: UInt32) -> Bool {
        self.gid == gid || groups.contains(gid)
    }

    /// "pid 1234 uid 1000 gid 1000", or "an unknown peer".
    public var description: String {
        self == .unknown ? "an unknown peer" : "pid \(pid) uid \(uid) gid \(gid)"
    }
}
