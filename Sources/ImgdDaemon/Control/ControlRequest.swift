import ImgdProtocol
import Synchronization

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
    /// What the handler made of the arguments while trying to answer at once, for its
    /// ``ControlCommandHandler/handle(_:)`` when the answer had to wait (not part of the
    /// request's value: not compared, not hashed).
    public let prepared = PreparedArguments()

    public init(id: JSONValue = .null, command: String, arguments: [String: JSONValue] = [:], peer: ControlPeer = .unknown) {
        self.id = id
        self.command = command
        self.arguments = arguments
        self.peer = peer
    }

    /// A `get` with `"fd": true`: its reply comes with a descriptor of the entry's file.
    public var wantsDescriptor: Bool {
        command == "get" && arguments["fd"] == .bool(true)
    }

    public static func == (lhs: ControlRequest, rhs: ControlRequest) -> Bool {
        lhs.id == rhs.id && lhs.command == rhs.command && lhs.arguments == rhs.arguments && lhs.peer == rhs.peer
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(id)
        hasher.combine(command)
        hasher.combine(arguments)
        hasher.combine(peer)
    }
}

/// A request's arguments as its handler parsed them, kept once: set by
/// ``ControlCommandHandler/replyAtOnce(_:)`` on the connection's event loop, read by
/// ``ControlCommandHandler/handle(_:)`` in the task that runs next, so a `get` the memory tier
/// cannot answer is not parsed (URL, options, key) again there.
public final class PreparedArguments: Sendable {
    private final class Box: Sendable {
        let value: any Sendable
        init(_ value: any Sendable) { self.value = value }
    }

    // Set at most once (the first value stays), with release and acquire ordering.
    private let box = AtomicLazyReference<Box>()
    /// Where a `get`'s answer came from (``DaemonHistograms/Source``'s raw value), for its
    /// latency: 0 until noted (a failure), ``unmeasured`` for an answer that is no lookup.
    private let source = Atomic<UInt8>(0)
    private static let unmeasured: UInt8 = 0xFF

    public init() {}

    /// The value kept, if it is a `Value`.
    public func value<Value: Sendable>(as type: Value.Type) -> Value? {
        box.load()?.value as? Value
    }

    /// Keeps `value` unless one is kept already.
    public func keep(_ value: some Sendable) {
        _ = box.storeIfNil(Box(value))
    }

    /// Notes where the answer came from (memory, disk or network), for the `get` latency
    /// histogram. Relaxed: read after the reply's promise completed, which orders it.
    public func noteSource(_ source: DaemonHistograms.Source) {
        self.source.store(source.rawValue, ordering: .relaxed)
    }

    /// Notes that the answer is no lookup (`get` with `wait: false` answering `pending`): the
    /// latency histogram leaves it out.
    public func noteUnmeasured() {
        source.store(Self.unmeasured, ordering: .relaxed)
    }

    /// The source noted; `.error` when none was (the request failed); nil when unmeasured.
    public var answerSource: DaemonHistograms.Source? {
        let raw = source.load(ordering: .relaxed)
        if raw == Self.unmeasured { return nil }
        return DaemonHistograms.Source(rawValue: raw) ?? .error
    }
}
