import NIOCore
import NIOHTTP1
import NIOHTTP2
import NIOPosix
import NIOSSL

/// A real HTTP/1.1 server on 127.0.0.1 whose responses are scripted by the request-target, for
/// testing a downloader against good and bad servers alike. Started with ``TLS`` it speaks
/// https instead, HTTP/2 or HTTP/1.1 as ALPN chooses (as CDNs do), with the same routes.
///
/// Routes: `/img/NAME.png|gif|jpg?w=W&h=H&bytes=N&seed=S` (8×8 by default, the PNG seed derived
/// from NAME), `/html`, `/status/CODE`, `/huge.png` (declares 100000×100000 pixels),
/// `/corrupt.png` (complete, but its IDAT fails its CRC),
/// `/flaky/NAME.png?fail=N&status=S&retry_after=R` (N failures with status S, 503 by default, per
/// exact target, then the image), `/redirect?to=URL` (percent-encoded) and `/loop/N`. Anything
/// else is 404; a parameter out of range is 400.
///
/// Modifiers on any route: `gate=NAME` (hold until ``openGate(_:)``), `delay_ms=N`, `slow_bps=N`,
/// `stall_after=N`, `close_after=N`, `hangup=close|reset` (no response: the connection is closed
/// or reset where the head would go), `cl=+K`/`cl=-K` (lie about Content-Length, then close),
/// `no_cl=1` (body ended by the close) and `chunked=1`. Otherwise responses carry a true
/// Content-Length and keep-alive is honoured, so clients can reuse connections.
///
/// Each instance is its own host:port with its own counters, on its own event-loop group of two
/// threads. Call ``shutdown()`` when done; it closes any connection still open.
public final class TestHTTPServer: Sendable {
    private let group: MultiThreadedEventLoopGroup
    private let channel: any Channel
    private let state: TestHTTPServerState

    /// The listening port, chosen by the kernel.
    public let port: Int

    private init(
        group: MultiThreadedEventLoopGroup, channel: any Channel, state: TestHTTPServerState, port: Int, isTLS: Bool
    ) {
        self.group = group
        self.channel = channel
        self.state = state
        self.port = port
        self.isTLS = isTLS
    }

    /// How a server speaks TLS: its certificate and key (PEM files, e.g. from
    /// ``TestCertificates``) and the protocols it offers by ALPN, in its order of preference.
    public struct TLS: Sendable {
        public var certificate: String
        public var key: String
        /// `["h2", "http/1.1"]` by default; `["http/1.1"]` for https without HTTP/2.
        public var protocols: [String]

        public init(certificate: String, key: String, protocols: [String] = ["h2", "http/1.1"]) {
            self.certificate = certificate
            self.key = key
            self.protocols = protocols
        }

        /// The pair's certificate and key.
        public init(_ pair: TestCertificates.Pair, protocols: [String] = ["h2", "http/1.1"]) {
            self.init(certificate: pair.certificate, key: pair.key, protocols: protocols)
        }
    }

    /// True when this server speaks https.
    public let isTLS: Bool

    /// Starts a server on 127.0.0.1 on an ephemeral port: plain HTTP/1.1, or https with `tls`;
    /// `host` binds another address instead (`::` listens on every address of both families,
    /// loopback included, so ``origin`` still reaches it). With `gauge`, its requests in flight
    /// also count in the gauge, which other servers may share; with `order`, its requests'
    /// targets are logged there in order of arrival, as other servers' may be.
    public static func start(
        host: String = "127.0.0.1", tls: TLS? = nil, gauge: InFlightGauge? = nil, order: RequestOrder? = nil
    ) async throws -> TestHTTPServer {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 2)
        let state = TestHTTPServerState(gauge: gauge, order: order)
        do {
            let sslContext = try tls.map { tls in
                var configuration = TLSConfiguration.makeServerConfiguration(
                    certificateChain: try NIOSSLCertificate.fromPEMFile(tls.certificate).map { .certificate($0) },
                    privateKey: .privateKey(try NIOSSLPrivateKey(file: tls.key, format: .pem)))
                configuration.applicationProtocols = tls.protocols
                return try NIOSSLContext(configuration: configuration)
            }
            let channel = try await ServerBootstrap(group: group)
                .serverChannelOption(.backlog, value: 256)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                // Slow bodies go out in small timed pieces: Nagle must not merge them.
                .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
                .childChannelInitializer { channel in
                    guard let sslContext else {
                        return channel.eventLoop.makeCompletedFuture {
                            try channel.pipeline.syncOperations.addHandlers(Self.http1Handlers(state: state))
                        }
                    }
                    return Self.configureTLS(channel, context: sslContext, state: state)
                }
                .bind(host: host, port: 0)
                .get()
            guard let port = channel.localAddress?.port else {
                try? await channel.close()
                throw ChannelError.unknownLocalAddress
            }
            return TestHTTPServer(group: group, channel: channel, state: state, port: port, isTLS: tls != nil)
        } catch {
            try? await group.shutdownGracefully()
            throw error
        }
    }

    /// The handlers of an HTTP/1.1 connection. NIO's decoder caps a request head (80 KiB per
    /// field and in all).
    private static func http1Handlers(state: TestHTTPServerState, tracksConnection: Bool = true) -> [any ChannelHandler] {
        [
            ByteToMessageHandler(HTTPRequestDecoder(leftOverBytesStrategy: .dropBytes)),
            TestHTTPHandler(state: state, tracksConnection: tracksConnection),
        ]
    }

    /// TLS, then HTTP/2 (each stream served by a ``TestHTTP2StreamHandler``) or HTTP/1.1, as ALPN chose.
    private static func configureTLS(
        _ channel: any Channel, context: NIOSSLContext, state: TestHTTPServerState
    ) -> EventLoopFuture<Void> {
        channel.eventLoop.makeCompletedFuture {
            try channel.pipeline.syncOperations.addHandler(TestConnectionTracker(state: state))
            try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: context))
        }.flatMap {
            channel.configureHTTP2SecureUpgrade(
                h2ChannelConfigurator: { channel in
                    channel.configureHTTP2Pipeline(mode: .server) { stream in
                        stream.eventLoop.makeCompletedFuture {
                            try stream.pipeline.syncOperations.addHandlers(
                                HTTP2FramePayloadToHTTP1ServerCodec(), TestHTTP2StreamHandler(state: state))
                        }
                    }.map { _ in }
                },
                http1ChannelConfigurator: { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandlers(http1Handlers(state: state, tracksConnection: false))
                    }
                })
        }
    }

    /// `http://127.0.0.1:PORT`, or `https://…` for a TLS server.
    public var origin: String { "\(isTLS ? "https" : "http")://127.0.0.1:\(port)" }

    /// The origin followed by `pathAndQuery` (which starts with `/`).
    public func url(_ pathAndQuery: String) -> String { origin + pathAndQuery }

    // MARK: Counters

    /// Requests whose request-target was exactly `pathAndQuery`, as received.
    public func requestCount(_ pathAndQuery: String) -> Int {
        state.reading { $0.requestCounts[pathAndQuery, default: 0] }
    }

    /// Requests whose request-target starts with `prefix`.
    public func requestCount(prefix: String) -> Int {
        state.reading { $0.requestLog.lazy.filter { $0.hasPrefix(prefix) }.count }
    }

    public var totalRequests: Int { state.reading { $0.requestLog.count } }

    /// Requests that came as HTTP/2 streams (the rest came over HTTP/1.1).
    public var http2Requests: Int { state.reading(\.http2Requests) }

    /// Request-targets in arrival order.
    public var requestLog: [String] { state.reading { $0.requestLog.ownedCopy() } }

    /// When the first request head arrived since start or ``resetCounters()``, taken on the
    /// server's event loop (a test timing a run does not depend on when its own task polls).
    public var firstRequestAt: ContinuousClock.Instant? { state.reading(\.firstRequestAt) }

    /// Every request with its header fields, in arrival order (forgotten by ``resetCounters()``).
    public var requests: [RecordedRequest] { state.reading { $0.requests.ownedCopy() } }

    /// Requests whose head has arrived and whose response end is not yet written (nor their
    /// connection closed). Held, delayed, slow and stalled requests count.
    public var inFlight: Int { state.reading(\.inFlight) }

    /// The peak of ``inFlight`` since start or ``resetCounters()``.
    public var maxInFlight: Int { state.reading(\.maxInFlight) }

    /// Connections accepted since start or ``resetCounters()``: fewer than requests proves reuse.
    public var connectionsAccepted: Int { state.reading(\.connectionsAccepted) }

    /// Forgets the request log, per-target counts (so `/flaky` targets fail again), the connection
    /// count and the peak. Requests in flight stay counted; opened gates stay open.
    public func resetCounters() { state.resetCounters() }

    /// Serves `body` at `path` (any query) with a 200 and `contentType`, over the routes: a
    /// document (a sitemap) whose content a test chooses, and which may name other URLs of this
    /// server, itself included.
    public func serve(_ path: String, body: [UInt8], contentType: String = "application/xml") {
        state.serve(path, Response(status: 200, headers: [("Content-Type", contentType)], body: body))
    }

    // MARK: Gates

    /// Releases every request held on gate `name`, and any that arrives on it later.
    public func openGate(_ name: String) { state.openGate(name) }

    // MARK: Waiting

    /// Waits until ``inFlight`` is at least `n`; false if `timeout` passed first.
    public func waitForInFlight(atLeast n: Int, timeout: Duration) async -> Bool {
        await poll(timeout: timeout) { $0.inFlight >= n }
    }

    /// Waits until ``totalRequests`` is at least `n`; false if `timeout` passed first.
    public func waitForRequests(atLeast n: Int, timeout: Duration) async -> Bool {
        await poll(timeout: timeout) { $0.requestLog.count >= n }
    }

    /// Polls the counters (``eventually(timeout:interval:_:)``): they change on event-loop
    /// threads, and polling here spares every caller a sleep.
    private func poll(timeout: Duration, until condition: (TestHTTPServerState.Counters) -> Bool) async -> Bool {
        await eventually(timeout: timeout) { state.reading(condition) }
    }

    // MARK: Shutdown

    /// Stops listening, closes every open connection (stalled and held ones too) and stops the
    /// event loops. Calling it again does nothing.
    public func shutdown() async throws {
        guard let connections = state.stop() else { return }
        try? await channel.close()
        for connection in connections {
            try? await connection.close()
        }
        try await group.shutdownGracefully()
    }
}
