/// The process at the other end of a control connection, as the kernel reported it when the
/// connection was accepted (`SO_PEERCRED`). Handlers log it with commands that change state.
public struct ControlPeer: Sendable, Hashable, CustomStringConvertible {
    public let pid: Int32
    public let uid: UInt32
    public let gid: UInt32

    public init(pid: Int32, uid: UInt32, gid: UInt32) {
        self.pid = pid
        self.uid = uid
        self.gid = gid
    }

    /// Stands for a peer whose credentials could not be read (pid 0, uid and gid -1).
    public static let unknown = ControlPeer(pid: 0, uid: .max, gid: .max)

    /// "pid 1234 uid 1000 gid 1000", or "an unknown peer".
    public var description: String {
        self == .unknown ? "an unknown peer" : "pid \(pid) uid \(uid) gid \(gid)"
    }
}
