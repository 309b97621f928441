import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import ServiceLifecycle

#if canImport(Glibc)
import Glibc
#endif

/// The HTTP face (Protocol.md, *HTTP face*): HTTP/1.1 with keep-alive and pipelining on a Unix
/// socket or a loopback TCP address, serving cached images read-through (`/image?url=…` and
/// the path form `/https/HOST/PATH`), `/metrics`, `/healthz` and `/readyz`. Off unless
/// `http-listen` is set.
///
/// Lifecycle as ``ControlServer``'s: ``start()`` once, then ``stopAccepting()`` (optional) and
/// ``stop()``; as a `Service`, it runs until the graceful shutdown of its group.
actor HTTPFaceServer {
    private enum State {
        case idle
        case starting
        case running(Listener)
        case draining(Listener)
        case stopping
        case stopped
    }

    private struct Listener {
        let channel: any Channel
        let socketFile: ControlSocketFile?
    }

    nonisolated let address: HTTPListenAddress
    nonisolated let limits: HTTPFaceLimits
    private let settings: HTTPFaceSettings
    private let registry: ControlConnectionRegistry
    private let allowRemote: Bool
    private let group: any EventLoopGroup
    private var state = State.idle

    init(
        listening address: HTTPListenAddress, limits: HTTPFaceLimits, allowRemote: Bool, backend: HTTPFaceBackend, logger: Logger,
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) {
        self.address = address
        self.limits = limits
        self.allowRemote = allowRemote
        let isTCP = if case .tcp = address { true } else { false }
        settings = HTTPFaceSettings(limits: limits, backend: backend, metrics: HTTPFaceMetrics(), logger: logger, isTCP: isTCP)
        var caps = limits.connectionCaps
        if isTCP {
            // A TCP peer has no uid: every client would share one "peer". The total holds alone.
            caps.maxConnectionsPerPeer = caps.maxConnections
            caps.reservedConnections = 0
        }
        registry = ControlConnectionRegistry(limits: caps)
        self.group = group
    }

    /// Connections open now.
    nonisolated var connectionCount: Int { registry.count }

    /// The face's counters.
    nonisolated var metrics: HTTPFaceMetrics { settings.metrics }

    /// Starts listening, refusing a TCP address that is not loopback (`http-allow-remote`).
    func start() async throws(HTTPFaceError.Start) {
        guard case .idle = state else { preconditionFailure("HTTPFaceServer.start() called twice") }
        state = .starting
        let listener: Listener
        do throws(HTTPFaceError.Start) {
            listener = try await listen()
        } catch {
            state = .stopped
            throw error
        }
        guard case .starting = state else {
            try? await listener.channel.close()
            listener.socketFile?.remove()
            return
        }
        state = .running(listener)
    }

    /// Stops accepting; connections in the middle of a response finish it, idle ones close.
    func stopAccepting() async {
        guard case .running(let listener) = state else {
            if case .idle = state { state = .stopped }
            if case .starting = state { state = .stopped }
            return
        }
        state = .draining(listener)
        let open = registry.stopAccepting()
        try? await listener.channel.close()
        for channel in open {
            channel.pipeline.fireUserInboundEventTriggered(ChannelShouldQuiesceEvent())
        }
    }

    /// ``stopAccepting()``, then waits for open connections at most the grace period, then
    /// closes the rest. Removes the socket file it created.
    func stop() async {
        await stopAccepting()
        guard case .draining(let listener) = state else { return }
        state = .stopping
        await registry.drain(within: limits.shutdownGracePeriod, on: group)
        listener.socketFile?.remove()
        state = .stopped
    }

    // MARK: Listening

    private func listen() async throws(HTTPFaceError.Start) -> Listener {
        let bootstrap = makeBootstrap()
        switch address {
        case .path(let path):
            do throws(ControlServerError) {
                let bound = try await ControlSocketFile.bind(path, with: bootstrap)
                return Listener(channel: bound.channel, socketFile: bound.file)
            } catch {
                let reason = if case .cannotListen(_, let reason) = error { reason } else { error.description }
                throw .init(address: address.description, reason: reason)
            }
        case .tcp(let host, let port):
            guard allowRemote || HTTPListenAddress.isLoopback(host: host) else { throw .remote(address.description) }
            do {
                let channel = try await bootstrap.bind(host: host, port: port).get()
                return Listener(channel: channel, socketFile: nil)
            } catch {
                throw .init(address: address.description, reason: ControlSocketFile.describe(error))
            }
        case .inheritedDescriptor(let descriptor):
            // A careless `ListenStream=8090` binds every address: checked as a configured one.
            if let host = Self.boundTCPHost(of: descriptor), !allowRemote, !HTTPListenAddress.isLoopback(host: host) {
                throw .remote("the socket systemd passed (bound to \(host))")
            }
            do {
                let channel = try await bootstrap.withBoundSocket(descriptor).get()
                return Listener(channel: channel, socketFile: nil)
            } catch {
                throw .init(address: address.description, reason: ControlSocketFile.describe(error))
            }
        }
    }

    /// The address a TCP socket is bound to, as text; nil for another kind of socket.
    private static func boundTCPHost(of descriptor: Int32) -> String? {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let got = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        guard got == 0 else { return nil }
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        switch Int32(storage.ss_family) {
        case AF_INET:
            var address = withUnsafePointer(to: &storage) { $0.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee.sin_addr } }
            guard inet_ntop(AF_INET, &address, &text, socklen_t(text.count)) != nil else { return nil }
        case AF_INET6:
            var address = withUnsafePointer(to: &storage) { $0.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { $0.pointee.sin6_addr } }
            guard inet_ntop(AF_INET6, &address, &text, socklen_t(text.count)) != nil else { return nil }
        default:
            return nil
        }
        let end = text.firstIndex(of: 0) ?? text.endIndex
        return String(decoding: text[..<end].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    private func makeBootstrap() -> ServerBootstrap {
        let settings = self.settings
        let registry = self.registry
        let isTCP = settings.isTCP
        return ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: Int32(clamping: max(256, limits.maxConnections + 64)))
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.allowRemoteHalfClosure, value: true)
            .childChannelInitializer { channel in
                let peer: EventLoopFuture<ControlPeer> =
                    isTCP ? channel.eventLoop.makeSucceededFuture(.unknown) : ControlPeerCredentials.read(from: channel)
                return peer.flatMapThrowing { peer in
                    try Self.initialize(channel, peer: peer, settings: settings, registry: registry)
                }
            }
    }

    /// Sets up an accepted connection: served, or refused with a raw `503`.
    private static func initialize(
        _ channel: any Channel, peer: ControlPeer, settings: HTTPFaceSettings, registry: ControlConnectionRegistry
    ) throws {
        let pipeline = channel.pipeline.syncOperations
        switch registry.admit(channel, peer: peer) {
        case .admitted:
            try HTTPFacePipeline.addHandlers(to: pipeline, settings: settings, peer: peer)
        case .busy(let error):
            settings.metrics.increment(.busyRefusals)
            let message = Self.busyMessage(error)
            settings.logger.forPeer(peer).info("http: refused a connection: \(message) (busy)")
            let refusal = HTTPFaceError(.serviceUnavailable, code: "busy", message: message, retryAfter: 1)
            try pipeline.addHandler(ControlRefusalHandler(line: HTTPFaceResponse.raw(refusal)))
        case .stopping:
            try pipeline.addHandler(ControlRefusalHandler(line: HTTPFaceResponse.raw(HTTPFaceError(.shuttingDown))))
        }
    }

    /// The registry's refusal in the HTTP face's terms: its settings are `http-`'s.
    private static func busyMessage(_ error: ControlError) -> String {
        switch error {
        case .busyPerPeer(let uid, let limit):
            "uid \(uid) already has \(limit) HTTP connections open, the most one user may have "
                + "(http-max-connections-per-peer; a proxy's keepalive pool must fit under it); close one or try again later"
        case .busyReserved(let limit, let reserved):
            "too many HTTP connections: the last \(reserved) of \(limit) are kept for users with no connection open, "
                + "and yours has one; close one or try again later"
        case .busy(let limit):
            "too many HTTP connections (\(limit), http-max-connections); try again later"
        default:
            error.message
        }
    }

}

extension HTTPFaceServer: Service {
    /// Serves until the group's graceful shutdown, then ``stop()``s.
    func run() async {
        try? await gracefulShutdown()
        await stop()
    }
}

extension HTTPFaceError {
    /// Why the HTTP face could not start listening.
    struct Start: Error, Sendable, CustomStringConvertible {
        let address: String
        let reason: String

        /// A non-loopback address without `http-allow-remote = true`.
        static func remote(_ address: String) -> Self {
            Self(
                address: address,
                reason: "not a loopback address: the HTTP face fetches whatever URL it is asked for, so anyone who can reach it could make imgd fetch; "
                    + "listen on 127.0.0.1 or a unix: socket, or set http-allow-remote = true if that is what you want")
        }

        var description: String { "cannot listen for HTTP on \(address): \(reason)" }
    }
}
