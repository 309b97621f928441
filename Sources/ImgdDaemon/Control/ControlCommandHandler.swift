/// Runs the daemon's commands for the control server. The server parses lines, keeps replies
/// in order and handles `subscribe` itself; every other request, with its peer, comes here.
///
/// Calls for one connection come one at a time, in request order; calls for different
/// connections run concurrently. A call is cancelled (`Task.isCancelled`) when its connection
/// closes or the server's shutdown deadline passes; its result is then dropped.
public protocol ControlCommandHandler: Sendable {
    /// The reply to `request`: a result (usually an object) or an error. A command name the
    /// handler does not know is answered with ``ControlError/unknownCommand(_:)``.
    func handle(_ request: ControlRequest) async -> Result<JSONValue, ControlError>
}
