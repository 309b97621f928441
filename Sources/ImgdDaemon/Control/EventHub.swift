import ImgdCore
import ImgdProtocol
import NIOCore

/// Numbers the daemon's events and hands them to the control connections that subscribed.
///
/// ``publish(_:data:)`` may be called from any thread (the downloader's, the pressure
/// watcher's) and never blocks on a connection: each subscriber's line is handed to its
/// connection's event loop, where a slow reader's events are dropped once its queue is full
/// (``ControlLimits/maxQueuedEvents``) and counted in ``droppedCount``.
public final class EventHub: Sendable {
    /// The events the daemon publishes (Protocol.md, *Events*).
    public static let defaultEventNames = [
        "fetched", "failed", "evicted", "list_claimed", "list_done", "memory_pressure", "revalidated", "window", "at_risk", "on_track",
    ]

    /// The names that may be published and subscribed to, in the order `subscribe` lists them.
    public let eventNames: [String]
    private let known: Set<String>

    /// Guards the sequence number and the subscribers together: numbering an event and handing
    /// it to every subscriber happen under one lock, so each subscriber gets events in `seq`
    /// order even when several threads publish. Handing over is `EventLoop.execute`, which only
    /// enqueues.
    private let state = Locked(State())

    private struct State {
        var sequence = 0
        var nextToken = 0
        var subscribers: [Int: Subscriber] = [:]
        var dropped = 0
    }

    private struct Subscriber {
        var names: Set<String>
        let deliver: @Sendable (ByteBuffer, Int) -> Void
    }

    /// A hub for `eventNames` (``defaultEventNames`` by default).
    public init(eventNames: [String] = EventHub.defaultEventNames) {
        self.eventNames = eventNames
        self.known = Set(eventNames)
    }

    /// Gives the event the next sequence number (from 1, over all events of the run) and sends
    /// `{"event": name, "seq": N, "data": data}` to the connections subscribed to `name`.
    /// Publishing a name not given at init is a programmer error.
    /// `data` is built and encoded only when a subscriber wants the event: a warming list
    /// publishes one per URL, usually to nobody.
    public func publish(_ name: String, data: @autoclosure () -> JSONValue) {
        precondition(known.contains(name), "EventHub: unknown event \(name)")
        state.withLock { state in
            state.sequence += 1
            let sequence = state.sequence
            var line: ByteBuffer?
            for subscriber in state.subscribers.values where subscriber.names.contains(name) {
                if line == nil {
                    line = ControlLine.event(head: ControlLine.eventHead(name), sequence: sequence, tail: ControlLine.eventTail(data()))
                }
                subscriber.deliver(line!, sequence)
            }
        }
    }

    /// The sequence number of the last event published (0 before the first).
    public var lastSequence: Int { state.withLock { $0.sequence } }

    /// Events not sent to a subscriber because it read too slowly, over all connections.
    public var droppedCount: Int { state.withLock { $0.dropped } }

    /// Connections subscribed now.
    public var subscriberCount: Int { state.withLock { $0.subscribers.count } }

    /// Whether `name` may be subscribed to.
    func isKnown(_ name: String) -> Bool { known.contains(name) }

    /// Adds a subscriber for `names`; `deliver` gets each line and its sequence number, on the
    /// publisher's thread, and must only hand it on. Returns a token for ``unsubscribe(_:)``.
    func subscribe(names: Set<String>, deliver: @escaping @Sendable (ByteBuffer, Int) -> Void) -> Int {
        state.withLock { state in
            state.nextToken += 1
            state.subscribers[state.nextToken] = Subscriber(names: names, deliver: deliver)
            return state.nextToken
        }
    }

    /// Changes the names a subscriber gets.
    func update(_ token: Int, names: Set<String>) {
        state.withLock { $0.subscribers[token]?.names = names }
    }

    func unsubscribe(_ token: Int) {
        state.withLock { _ = $0.subscribers.removeValue(forKey: token) }
    }

    func recordDropped() {
        state.withLock { $0.dropped += 1 }
    }
}
