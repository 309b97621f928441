/// The control socket's limits, per server and per connection (Protocol.md, *Limits*).
public struct ControlLimits: Sendable, Hashable {
    /// Connections open at once: 256 by default. The next one gets one `busy` line and is closed.
    public var maxConnections: Int
    /// Connections one peer (one uid, from `SO_PEERCRED`; root and the daemon's own user
    /// included) may have open at once: 32 by default. Its next one gets one `busy` line naming
    /// this limit and is closed; other users are not affected.
    public var maxConnectionsPerPeer: Int
    /// The last connections of ``maxConnections`` that only a peer with no connection open may
    /// take: an eighth of it, at least 1, by default (32 of 256). So peers that already have
    /// connections fill at most `maxConnections - reservedConnections` (224 by default: 7 peers
    /// at the per-peer cap), and a peer with none open gets one while the total is under
    /// ``maxConnections``, however many connections the others hold. Not a setting: derived from
    /// `max-connections`; tests of the total alone set it to 0.
    public var reservedConnections: Int
    /// Bytes in one line, excluding its `\n` (and a `\r` before it): 1 MiB (1,048,576) by default.
    /// A longer line is answered with `line_too_long` and the connection is closed; no more than
    /// this plus one read is ever buffered.
    public var maxLineBytes: Int
    /// Requests of one connection waiting for their replies (the one running included): 64 by
    /// default. Each request beyond is answered, in order, with `too_many_requests`.
    public var maxPendingRequests: Int
    /// Bytes of replies and events queued for one connection and not yet taken by the kernel:
    /// 4 MiB by default. From half of it on, the connection's requests wait and its input is not
    /// read until the client takes some (backpressure), so the queue passes the limit by one
    /// reply at most; events past the limit are dropped.
    public var maxQueuedOutputBytes: Int
    /// A connection over half its output limit whose client takes nothing for this long is
    /// disconnected: 10 seconds by default.
    public var slowReaderTimeout: Duration
    /// Events queued for one subscriber and not yet taken by the kernel: 1,000 by default.
    /// Further events are dropped and counted; the subscriber gets one `events_dropped` line
    /// once it reads again.
    public var maxQueuedEvents: Int
    /// A connection with no request running or waiting and no subscription is closed after this
    /// long without a request: 10 minutes by default.
    public var idleTimeout: Duration
    /// How long ``ControlServer/stop()`` lets running requests finish and replies drain before it
    /// closes the remaining connections: 5 seconds by default.
    public var shutdownGracePeriod: Duration

    public init(
        maxConnections: Int = 256,
        maxConnectionsPerPeer: Int = 32,
        reservedConnections: Int? = nil,
        maxLineBytes: Int = 1_048_576,
        maxPendingRequests: Int = 64,
        maxQueuedOutputBytes: Int = 4 * 1_048_576,
        maxQueuedEvents: Int = 1_000,
        idleTimeout: Duration = .seconds(600),
        shutdownGracePeriod: Duration = .seconds(5),
        slowReaderTimeout: Duration = .seconds(10)
    ) {
        precondition(maxConnections > 0 && maxConnectionsPerPeer > 0 && maxLineBytes > 0 && maxPendingRequests > 0)
        precondition(maxQueuedOutputBytes > 0 && maxQueuedEvents > 0)
        self.maxConnections = maxConnections
        self.maxConnectionsPerPeer = maxConnectionsPerPeer
        self.reservedConnections = reservedConnections ?? max(1, maxConnections / 8)
        precondition(self.reservedConnections >= 0 && self.reservedConnections <= maxConnections)
        self.maxLineBytes = maxLineBytes
        self.maxPendingRequests = maxPendingRequests
        self.maxQueuedOutputBytes = maxQueuedOutputBytes
        self.maxQueuedEvents = maxQueuedEvents
        self.idleTimeout = idleTimeout
        self.shutdownGracePeriod = shutdownGracePeriod
        self.slowReaderTimeout = slowReaderTimeout
    }

}
