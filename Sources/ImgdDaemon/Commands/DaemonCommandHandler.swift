import ImgdCore
import ImgdProtocol

/// The daemon's commands (Protocol.md, *Commands*), run for the control server. Commands that
/// change state are logged with the peer that sent them.
final class DaemonCommandHandler: ControlCommandHandler {
    /// The services, attached once they exist (the server is built before them).
    private let services = Locked<DaemonServices?>(nil)

    func attach(_ services: DaemonServices) {
        self.services.withLock { $0 = services }
    }

    /// `ping`, `hello`, and a `get` the memory tier answers (no index query, no file read on the
    /// event loop; a disk hit goes to ``handle(_:)``, which also fills the memory tier).
    func answerAtOnce(_ request: ControlRequest) -> Result<JSONValue, ControlError>? {
        guard let services = services.withLock({ $0 }) else { return nil }
        let commands = DaemonCommands(services: services, request: request)
        do {
            return try commands.answerAtOnce().map { .success($0) }
        } catch {
            return .failure(error)
        }
    }

    func handle(_ request: ControlRequest) async -> Result<JSONValue, ControlError> {
        guard let services = services.withLock({ $0 }) else { return .failure(.shuttingDown) }
        let commands = DaemonCommands(services: services, request: request)
        do {
            return .success(try await commands.run())
        } catch {
            return .failure(error)
        }
    }
}
