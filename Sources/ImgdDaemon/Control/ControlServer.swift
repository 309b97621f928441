import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle

/// The control socket's server (Protocol.md, *Control socket*): JSON lines over a Unix stream
/// socket. It frames lines, keeps each connection's replies in request order, enforces the
/// limits (``ControlLimits``), handles `subscribe` with the ``EventHub``, and hands every other
/// request to the ``ControlCommandHandler``.
///
/// Lifecycle: ``start()`` once, then ``stopAccepting()`` (optional) and ``stop()``; a server
/// does not restart. The daemon must call ``stop()`` before it exits, so that clients get their
/// replies and the socket file is removed. As a `Service`, it runs until the graceful shutdown
/// of its group, then stops.
public actor ControlServer {
    private enum State {
        case idle
        case starting
        case running(Listener)
        /// Not accepting; the open connections were told and may finish.
        case draining(Listener)
        case stopping
        case stopped
    }

    private struct Listener {
        let channel: any Channel
        /// The socket file this server created, removed at stop; `nil` for an inherited socket.
        let socketFile: ControlSocketFile?
    }

    public nonisolated let address: ControlListenAddress
    public nonisolated let limits: ControlLimits
    private let settings: ControlConnectionSettings
    private let registry: ControlConnectionRegistry
    private let group: any EventLoopGroup
    private var state = State.idle

    /// A server for `address`; each `get`'s latency goes to `histograms` (face `control`). `log` gets one line per connection refused as busy, per client
    /// disconnected for not reading, and per line too long, each naming the peer. Connections
    /// run on `group` (NIO's shared singleton by default).
    public init(
        listening address: ControlListenAddress,
        limits: ControlLimits = ControlLimits(),
        handler: any ControlCommandHandler,
        events: EventHub,
        logger: Logger,
        histograms: DaemonHistograms = DaemonHistograms(),
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) {
        self.address = address
        self.limits = limits
        self.settings = ControlConnectionSettings(
            limits: limits, handler: handler, events: events, logger: logger, metrics: ControlMetrics(),
            histograms: histograms)
        self.registry = ControlConnectionRegistry(limits: limits)
        self.group = group
    }

    /// Connections open now (refused ones not counted).
    public nonisolated var connectionCount: Int { registry.count }

    /// Connections the peer `uid` has open now.
    public nonisolated func connectionCount(of uid: UInt32) -> Int { registry.count(of: uid) }

    /// High-water marks of the server's buffers, for tests.
    nonisolated var metrics: ControlMetrics.Snapshot { settings.metrics.snapshot }

    /// Starts listening. For a path: a stale socket file is replaced; a live server's socket
    /// (``ControlServerError/alreadyRunning(path:)``) and anything that is not a socket
    /// (``ControlServerError/notASocket(path:)``) are left alone. The new socket file gets mode
    /// 0660. Calling it twice is a programmer error.
    public func start() async throws(ControlServerError) {
        guard case .idle = state else { preconditionFailure("ControlServer.start() called twice") }
        state = .starting
        let listener: Listener
        do throws(ControlServerError) {
            listener = try await listen()
        } catch {
            state = .stopped
            throw error
        }
        guard case .starting = state else {
            // stop() came while the socket was being bound.
            try? await listener.channel.close()
            listener.socketFile?.remove()
            return
        }
        state = .running(listener)
    }

    /// Stops taking work: stops accepting connections and tells the open ones (waiting and new
    /// requests get `shutting_down`, the running ones go on, subscriptions end). The daemon calls
    /// it before it cancels transfers, so that a request waiting on a download is answered by
    /// that cancellation while no new request starts; ``stop()`` then waits for the rest. Does
    /// nothing when the server is not running.
    public func stopAccepting() async {
        guard case .running(let listener) = state else {
            if case .idle = state { state = .stopped }
            if case .starting = state { state = .stopped }
            return
        }
        state = .draining(listener)
        let open = registry.stopAccepting()
        try? await listener.channel.close()
        for channel in open {
            channel.pipeline.fireUserInboundEventTriggered(ControlShutdownEvent())
        }
    }

    /// Stops: ``stopAccepting()`` if that was not done yet, then waits for the open connections
    /// to close at most ``ControlLimits/shutdownGracePeriod``, then closes the rest, cancelling
    /// their running commands. Removes the socket file this server created. Returns at once when
    /// the server is not running.
    public func stop() async {
        await stopAccepting()
        guard case .draining(let listener) = state else { return }
        state = .stopping
        await registry.drain(within: limits.shutdownGracePeriod, on: group)
        listener.socketFile?.remove()
        state = .stopped
    }

    // MARK: Listening

    private func listen() async throws(ControlServerError) -> Listener {
        let bootstrap = makeBootstrap()
        switch address {
        case .path(let path):
            let bound = try await ControlSocketFile.bind(path, with: bootstrap)
            return Listener(channel: bound.channel, socketFile: bound.file)
        case .inheritedDescriptor(let descriptor):
            do {
                let channel = try await bootstrap.withBoundSocket(descriptor).get()
                return Listener(channel: channel, socketFile: nil)
            } catch {
                throw .cannotListen(address: address.description, reason: ControlSocketFile.describe(error))
            }
        }
    }

    private func makeBootstrap() -> ServerBootstrap {
        let settings = self.settings
        let registry = self.registry
        return ServerBootstrap(group: group)
            // Room for a burst of connections beyond the limit, so the excess gets `busy`
            // rather than a refused connect; the kernel caps it at somaxconn.
            .serverChannelOption(.backlog, value: Int32(clamping: max(256, limits.maxConnections + 64)))
            // A client may shut down its side after its last request and still read the replies.
            .childChannelOption(.allowRemoteHalfClosure, value: true)
            .childChannelInitializer { channel in
                Self.initialize(channel, settings: settings, registry: registry)
            }
    }

    /// Sets up an accepted connection: served, or refused with one line.
    private static func initialize(
        _ channel: any Channel, settings: ControlConnectionSettings, registry: ControlConnectionRegistry
    ) -> EventLoopFuture<Void> {
        ControlPeerCredentials.read(from: channel).flatMapThrowing { peer in
            let pipeline = channel.pipeline.syncOperations
            switch registry.admit(channel, peer: peer) {
            case .admitted:
                try ControlConnectionPipeline.addHandlers(to: pipeline, settings: settings, peer: peer)
            case .busy(let error):
                settings.metrics.increment(\.busyRefusals)
                settings.logger.forPeer(peer).info("control: refused a connection: \(error.message) (busy)")
                try pipeline.addHandler(ControlRefusalHandler(line: ControlLine.error(error)))
            case .stopping:
                try pipeline.addHandler(ControlRefusalHandler(line: ControlLine.error(.shuttingDown)))
            }
        }
    }

}

extension ControlServer: Service {
    /// Serves until the group's graceful shutdown (or cancellation), then ``stop()``s. The
    /// daemon calls ``start()`` before the group runs: `READY=1` waits for the socket.
    public func run() async {
        try? await gracefulShutdown()
        await stop()
    }
}
