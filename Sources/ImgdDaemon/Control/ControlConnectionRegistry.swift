import NIOCore
import Synchronization

/// The control server's open connections, admitted up to the limit; read by
/// ``ControlServer/connectionCount`` and by `stop()`, written from the event loops.
final class ControlConnectionRegistry: Sendable {
    enum Admission {
        case admitted
        /// At the limit: refuse with `busy`.
        case busy
        /// The server is stopping: refuse with `shutting_down`.
        case stopping
    }

    let maxConnections: Int

    /// Guards the admitted channels and whether more are admitted.
    private let state = Mutex(State())

    private struct State {
        var connections: [ObjectIdentifier: any Channel] = [:]
        var accepting = true
    }

    init(maxConnections: Int) {
        self.maxConnections = maxConnections
    }

    /// Admits `channel` if there is room and the server is not stopping; an admitted channel
    /// leaves the registry when it closes.
    func admit(_ channel: any Channel) -> Admission {
        let admission: Admission = state.withLock { state in
            guard state.accepting else { return .stopping }
            guard state.connections.count < maxConnections else { return .busy }
            state.connections[ObjectIdentifier(channel)] = channel
            return .admitted
        }
        if case .admitted = admission {
            let key = ObjectIdentifier(channel)
            channel.closeFuture.whenComplete { [self] _ in
                _ = state.withLock { $0.connections.removeValue(forKey: key) }
            }
        }
        return admission
    }

    var count: Int { state.withLock { $0.connections.count } }

    /// Admits no more connections; returns those open.
    func stopAccepting() -> [any Channel] {
        state.withLock { state in
            state.accepting = false
            return Array(state.connections.values)
        }
    }

    var connections: [any Channel] { state.withLock { Array($0.connections.values) } }
}
