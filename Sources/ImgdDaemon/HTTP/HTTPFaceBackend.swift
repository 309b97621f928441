import ImgdCore
import ImgdProtocol
import ImgdStore
import NIOCore
import NIOHTTP1

/// The daemon as the HTTP face sees it: an image request becomes a `get` (the same lookup,
/// counters, limits and errors as on the control socket), and the other routes ask the
/// daemon's status. Attached once the services exist (the face is built before them).
final class HTTPFaceBackend: Sendable {
    private let services = Locked<DaemonServices?>(nil)

    func attach(_ services: DaemonServices) {
        self.services.withLock { $0 = services }
    }

    /// Whether the services are attached (not yet during a start, nor in the fuzzer).
    var isAttached: Bool { services.withLock { $0 != nil } }

    /// The `get` that `query` from `peer` stands for; nil while the daemon is not attached.
    func commands(for query: ImageQuery, peer: ControlPeer) -> DaemonCommands? {
        guard let services = services.withLock({ $0 }) else { return nil }
        var arguments: [String: JSONValue] = ["url": .string(query.url)]
        for (name, value) in query.arguments { arguments[name] = .string(value) }
        return DaemonCommands(services: services, request: ControlRequest(command: "get", arguments: arguments, peer: peer))
    }

    /// A `get` over HTTP answered by `source` (nil: an error), for the latency histograms
    /// (`metrics`' `get_duration_seconds{face="http"}`).
    func recordGet(source: CacheSource?, since started: NIODeadline) {
        guard let services = services.withLock({ $0 }) else { return }
        let elapsed = max(0, (NIODeadline.now() - started).nanoseconds)
        services.histograms.recordGet(face: .http, source: source.map(DaemonHistograms.Source.init) ?? .error, nanoseconds: UInt64(elapsed))
    }

    /// `/metrics`, `/healthz` and `/readyz`.
    func answer(_ route: HTTPFaceRoute) async -> HTTPFaceResponse {
        guard let services = services.withLock({ $0 }) else { return .error(HTTPFaceError(.shuttingDown)) }
        switch route {
        case .healthz:
            return await services.health.check()
        case .readyz:
            // What status.ready says: 200 once the ready lists are cached (latched), else 503.
            let readiness = services.readiness.snapshot()
            return .json(readiness.json, status: readiness.ready ? .ok : .serviceUnavailable)
        case .metrics:
            // The text of `imgctl stats --prometheus`: one renderer over the `metrics` snapshot.
            return .text(services.metricsText(), contentType: "text/plain; version=0.0.4; charset=utf-8")
        case .image:
            return .error(.notFound("an image is not answered here"))
        }
    }
}
