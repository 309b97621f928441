import ImgdCore
import NIOCore

/// The control server's open connections, admitted up to the limits (``ControlLimits``): the
/// total, the per-peer cap, and the reserve kept for peers with no connection open. Read by
/// ``ControlServer/connectionCount`` and by `stop()`, written from the event loops.
final class ControlConnectionRegistry: Sendable {
    enum Admission {
        case admitted
        /// Over a limit: refuse with this `busy` error.
        case busy(ControlError)
        /// The server is stopping: refuse with `shutting_down`.
        case stopping
    }

    let limits: ControlLimits

    /// Guards the admitted channels, their count per peer, and whether more are admitted.
    private let state = Locked(State())

    private struct State {
        var connections: [ObjectIdentifier: any Channel] = [:]
        /// Open connections by peer uid (an unknown peer counts as uid 2³²−1); no zero entries.
        var perPeer: [UInt32: Int] = [:]
        var accepting = true
    }

    init(limits: ControlLimits) {
        self.limits = limits
    }

    /// Admits `channel` of `peer` if the limits leave room and the server is not stopping; an
    /// admitted channel leaves the registry when it closes.
    ///
    /// In order: the total (``ControlLimits/maxConnections``), the peer's own count
    /// (``ControlLimits/maxConnectionsPerPeer``), then the reserve: a peer that has a connection
    /// open is admitted only while fewer than `maxConnections - reservedConnections` are open.
    func admit(_ channel: any Channel, peer: ControlPeer) -> Admission {
        let uid = peer.uid
        let admission: Admission = state.withLock { state in
            guard state.accepting else { return .stopping }
            let total = state.connections.count
            guard total < limits.maxConnections else { return .busy(.busy(limit: limits.maxConnections)) }
            let own = state.perPeer[uid, default: 0]
            guard own < limits.maxConnectionsPerPeer else {
                return .busy(.busyPerPeer(uid: uid, limit: limits.maxConnectionsPerPeer))
            }
            guard own == 0 || total < limits.maxConnections - limits.reservedConnections else {
                return .busy(.busyReserved(limit: limits.maxConnections, reserved: limits.reservedConnections))
            }
            state.connections[ObjectIdentifier(channel)] = channel
            state.perPeer[uid] = own + 1
            return .admitted
        }
        if case .admitted = admission {
            let key = ObjectIdentifier(channel)
            channel.closeFuture.whenComplete { [self] _ in
                state.withLock { state in
                    guard state.connections.removeValue(forKey: key) != nil else { return }
                    let left = state.perPeer[uid, default: 1] - 1
                    state.perPeer[uid] = left > 0 ? left : nil
                }
            }
        }
        return admission
    }

    var count: Int { state.withLock { $0.connections.count } }

    /// Connections `uid` has open now.
    func count(of uid: UInt32) -> Int { state.withLock { $0.perPeer[uid, default: 0] } }

    /// Admits no more connections; returns those open.
    func stopAccepting() -> [any Channel] {
        state.withLock { state in
            state.accepting = false
            return Array(state.connections.values)
        }
    }

    var connections: [any Channel] { state.withLock { Array($0.connections.values) } }

    /// Waits for the open connections to close, at most `grace`, then closes the rest: a stop's
    /// last step, after the server stopped accepting and told its connections.
    func drain(within grace: Duration, on group: any EventLoopGroup) async {
        let open = connections
        let loop = group.any()
        let deadline = loop.scheduleTask(in: TimeAmount(grace)) { [self] in
            for channel in connections { channel.close(promise: nil) }
        }
        try? await EventLoopFuture.andAllComplete(open.map(\.closeFuture), on: loop).get()
        deadline.cancel()
    }
}
