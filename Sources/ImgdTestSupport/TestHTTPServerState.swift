import NIOCore
import NIOConcurrencyHelpers

/// The counters, gates and open connections of one ``TestHTTPServer``, shared by the test's task
/// and the server's event-loop threads.
///
/// One lock guards it all (`state`), held only for a few assignments and never while calling out:
/// gate actions and channel closes run after it is released.
final class TestHTTPServerState: Sendable {
    struct Counters: Sendable {
        /// Request-targets in arrival order.
        var requestLog: [String] = []
        /// Requests per exact request-target; also the attempt numbers `/flaky` counts failures by.
        var requestCounts: [String: Int] = [:]
        var inFlight = 0
        var maxInFlight = 0
        var connectionsAccepted = 0
        /// Requests that came as HTTP/2 streams.
        var http2Requests = 0
        /// Every request with its header fields, in arrival order.
        var requests: [TestHTTPServer.RecordedRequest] = []
        /// When the first request head arrived, on the server's own thread.
        var firstRequestAt: ContinuousClock.Instant?
    }

    /// Everything the lock guards.
    struct Locked: Sendable {
        var counters = Counters()
        /// Gates opened so far: a request arriving later on one of them passes at once.
        var openGates: Set<String> = []
        /// Actions of requests held on a gate that is still closed, by gate name.
        var gateWaiters: [String: [@Sendable () -> Void]] = [:]
        /// Open child channels, so shutdown can close connections a test left stalled.
        var connections: [ObjectIdentifier: any Channel] = [:]
        /// Set once by shutdown; connections accepted after it are closed at once.
        var isStopped = false
        /// Documents served at fixed paths (``TestHTTPServer/serve(_:body:contentType:)``), over
        /// the routes.
        var documents: [String: TestHTTPServer.Response] = [:]
    }

    private let state = NIOLockedValueBox(Locked())
    /// Shared with other servers, to see a client's cap over several hosts; nil when none is.
    private let gauge: InFlightGauge?
    /// Shared with other servers, to see which host was asked first; nil when none is.
    private let order: RequestOrder?

    init(gauge: InFlightGauge? = nil, order: RequestOrder? = nil) {
        self.gauge = gauge
        self.order = order
    }

    // MARK: Documents

    func serve(_ path: String, _ response: TestHTTPServer.Response) {
        state.withLockedValue { $0.documents[path] = response }
    }

    /// The document served at `target`'s path, if one is, else `routed`.
    func response(for target: TestHTTPServer.Target, routed: TestHTTPServer.Response) -> TestHTTPServer.Response {
        state.withLockedValue { $0.documents[target.path] } ?? routed
    }

    // MARK: Requests

    /// Records a request head and returns its attempt number (1-based) for that exact target.
    func requestArrived(_ target: String, headers: [(String, String)] = [], isHTTP2: Bool = false) -> Int {
        gauge?.enter()
        order?.append(target)
        return state.withLockedValue { locked in
            if isHTTP2 { locked.counters.http2Requests += 1 }
            let now = ContinuousClock.now
            if locked.counters.firstRequestAt == nil { locked.counters.firstRequestAt = now }
            locked.counters.requestLog.append(target)
            locked.counters.requests.append(
                TestHTTPServer.RecordedRequest(
                    target: target, headers: headers.map { TestHTTPServer.RecordedRequest.Header(name: $0.0, value: $0.1) },
                    arrivedAt: now))
            let attempt = locked.counters.requestCounts[target, default: 0] + 1
            locked.counters.requestCounts[target] = attempt
            locked.counters.inFlight += 1
            locked.counters.maxInFlight = max(locked.counters.maxInFlight, locked.counters.inFlight)
            return attempt
        }
    }

    /// A request's response ended or its connection closed; called exactly once per arrived request.
    func requestFinished() {
        state.withLockedValue { $0.counters.inFlight -= 1 }
        gauge?.leave()
    }

    /// Runs `body` on the counters under the lock and returns what it makes of them.
    ///
    /// The counters are read in place, never copied out, and an array handed out must be an
    /// `ownedCopy()` (see there for why).
    func reading<Value>(_ body: (Counters) -> Value) -> Value {
        state.withLockedValue { body($0.counters) }
    }

    /// Forgets logged requests, connection and peak counts; requests still in flight stay counted
    /// (their ends will be), so the new peak starts from them.
    func resetCounters() {
        state.withLockedValue { locked in
            let inFlight = locked.counters.inFlight
            locked.counters = Counters(inFlight: inFlight, maxInFlight: inFlight)
        }
    }

    // MARK: Gates

    /// Runs `action` when `gate` opens, or now if it already has.
    func whenGateOpens(_ gate: String, _ action: @escaping @Sendable () -> Void) {
        let isOpen = state.withLockedValue { locked in
            if locked.openGates.contains(gate) { return true }
            locked.gateWaiters[gate, default: []].append(action)
            return false
        }
        if isOpen { action() }
    }

    func openGate(_ gate: String) {
        let waiters = state.withLockedValue { locked in
            locked.openGates.insert(gate)
            return locked.gateWaiters.removeValue(forKey: gate) ?? []
        }
        for action in waiters { action() }
    }

    // MARK: Connections

    /// Counts and remembers a new connection; false when the server is stopping (close it).
    func connectionOpened(_ channel: any Channel) -> Bool {
        state.withLockedValue { locked in
            guard !locked.isStopped else { return false }
            locked.counters.connectionsAccepted += 1
            locked.connections[ObjectIdentifier(channel)] = channel
            return true
        }
    }

    func connectionClosed(_ channel: any Channel) {
        _ = state.withLockedValue { $0.connections.removeValue(forKey: ObjectIdentifier(channel)) }
    }

    /// Marks the server stopped and hands over the open connections to close; nil if it was
    /// already stopped.
    func stop() -> [any Channel]? {
        state.withLockedValue { locked in
            guard !locked.isStopped else { return nil }
            locked.isStopped = true
            return Array(locked.connections.values)
        }
    }
}
