import ImgdCore
import ImgdProtocol
import NIOCore

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

    /// ``answerAtOnce(_:)``'s reply as a line; a memory hit's result is written straight into
    /// it (``DaemonCommands/writeJSON(_:source:data:into:)``), the same bytes.
    func replyAtOnce(_ request: ControlRequest) -> ByteBuffer? {
        guard request.command == "get" else {
            return answerAtOnce(request).map { ControlLine.reply(id: request.id, $0) }
        }
        guard let services = services.withLock({ $0 }) else { return nil }
        let commands = DaemonCommands(services: services, request: request)
        do {
            guard let answer = try commands.cachedHit(tier: .memory) else { return nil }
            return ControlLine.reply(id: request.id) { line in
                DaemonCommands.writeJSON(answer.hit, source: answer.hit.source, data: answer.withData, into: &line)
            }
        } catch {
            return ControlLine.reply(id: request.id, .failure(error))
        }
    }

    func handlePassingDescriptor(_ request: ControlRequest) async -> (Result<JSONValue, ControlError>, PassedDescriptor?) {
        guard let services = services.withLock({ $0 }) else { return (.failure(.shuttingDown), nil) }
        let commands = DaemonCommands(services: services, request: request)
        do {
            let (result, descriptor) = try await commands.getPassingDescriptor()
            return (.success(result), descriptor)
        } catch {
            return (.failure(error), nil)
        }
    }

    func openStream(_ request: ControlRequest) async -> Result<ControlStream, ControlError> {
        guard let services = services.withLock({ $0 }) else { return .failure(.shuttingDown) }
        let commands = DaemonCommands(services: services, request: request)
        do {
            return .success(try await commands.openStream())
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
