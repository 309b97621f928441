import Logging

/// What every connection of one server shares.
struct ControlConnectionSettings: Sendable {
    let limits: ControlLimits
    let handler: any ControlCommandHandler
    let events: EventHub
    let logger: Logger
    let metrics: ControlMetrics
    /// `get` latency, recorded under the `control` face by each connection.
    let histograms: DaemonHistograms
}

/// Sent through each connection's pipeline when the server stops.
struct ControlShutdownEvent: Sendable {}
