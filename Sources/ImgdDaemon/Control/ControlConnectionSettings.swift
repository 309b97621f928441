/// What every connection of one server shares.
struct ControlConnectionSettings: Sendable {
    let limits: ControlLimits
    let handler: any ControlCommandHandler
    let events: EventHub
    let log: @Sendable (String) -> Void
    let metrics: ControlMetrics
}

/// Sent through each connection's pipeline when the server stops.
struct ControlShutdownEvent: Sendable {}
