/// The HTTP face's limits (Protocol.md, *HTTP face*): who may hold connections, and how long a
/// request and a quiet connection may take.
public struct HTTPFaceLimits: Sendable, Hashable {
    /// Connections open at once: 256 by default. The next one gets `503 busy` and is closed.
    public var maxConnections: Int
    /// Connections one uid may hold on the Unix listener: 64 by default, above the control
    /// socket's 32 because a proxy in front of imgd (nginx) is one uid and keeps a pool of idle
    /// upstream connections (`keepalive 32;` fits). A TCP peer has no uid: only the total holds.
    public var maxConnectionsPerPeer: Int
    /// The last connections of ``maxConnections`` kept for uids with none open: an eighth.
    public var reservedConnections: Int
    /// The whole request head (request line and headers): 32 KiB by default; past it, `431`.
    /// A request target (the URL) counts against it.
    public var maxHeaderBytes: Int
    /// A request head must arrive whole within this long once its first byte has: 10 s by
    /// default; past it, `408` and the connection closes (a client dripping its head, slowloris).
    public var headerTimeout: Duration
    /// A connection with no request for this long after its last response is closed: 75 s by
    /// default, above nginx's upstream `keepalive_timeout` (60 s), so a proxy closes first and
    /// never reuses a connection imgd is closing.
    public var idleTimeout: Duration
    /// How long a stop lets responses in progress finish: 5 s.
    public var shutdownGracePeriod: Duration

    public init(
        maxConnections: Int = 256,
        maxConnectionsPerPeer: Int = 64,
        reservedConnections: Int? = nil,
        maxHeaderBytes: Int = 32 * 1024,
        headerTimeout: Duration = .seconds(10),
        idleTimeout: Duration = .seconds(75),
        shutdownGracePeriod: Duration = .seconds(5)
    ) {
        precondition(maxConnections > 0 && maxConnectionsPerPeer > 0 && maxHeaderBytes > 0)
        self.maxConnections = maxConnections
        self.maxConnectionsPerPeer = maxConnectionsPerPeer
        self.reservedConnections = reservedConnections ?? max(1, maxConnections / 8)
        self.maxHeaderBytes = maxHeaderBytes
        self.headerTimeout = headerTimeout
        self.idleTimeout = idleTimeout
        self.shutdownGracePeriod = shutdownGracePeriod
    }

    /// The same caps in the control socket's terms, for the connection registry both share.
    var connectionCaps: ControlLimits {
        ControlLimits(
            maxConnections: maxConnections, maxConnectionsPerPeer: maxConnectionsPerPeer,
            reservedConnections: reservedConnections, shutdownGracePeriod: shutdownGracePeriod)
    }
}
