import ImgdProtocol

/// One request read from the control socket: `{"id": …, "cmd": "…", …arguments}`.
public struct ControlRequest: Sendable, Hashable {
    /// The request's `id`, echoed in its reply; `null` when absent.
    public let id: JSONValue
    /// The `cmd` member.
    public let command: String
    /// Every member but `id` and `cmd`. Unknown arguments are ignored by the accessors' users,
    /// so newer clients work with older daemons.
    public let arguments: [String: JSONValue]
    /// Who sent it.
    public let peer: ControlPeer

    public init(id: JSONValue = .null, command: String, arguments: [String: JSONValue] = [:], peer: ControlPeer = .unknown) {
        self.id = id
        self.command = command
        self.arguments = arguments
        self.peer = peer
    }
}
