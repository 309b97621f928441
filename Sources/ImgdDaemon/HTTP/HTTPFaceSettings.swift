import Logging

/// What every connection of one HTTP face shares: its limits, the daemon behind it, its
/// counters and logger, and whether it listens on TCP (no uid for a peer, `Host` checked).
struct HTTPFaceSettings: Sendable {
    let limits: HTTPFaceLimits
    let backend: HTTPFaceBackend
    let metrics: HTTPFaceMetrics
    let logger: Logger
    let isTCP: Bool
}
