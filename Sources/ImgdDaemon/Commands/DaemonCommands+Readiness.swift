import ImgdCore
import ImgdProtocol

extension DaemonCommands {
    /// The longest `timeout` `wait-ready` takes: a day (longer is `invalid_argument`; without
    /// one it waits until ready or until the connection closes).
    static let longestReadyWait = Duration.seconds(86_400)

    /// `wait-ready {timeout?}`: `status.ready` once readiness is reached (at once if it is),
    /// else `not_ready` naming what is missing when `timeout` passes. It takes no path or list
    /// name: it reports what `status` shows anyone who can connect, and makes imgd read nothing.
    /// Closing the connection ends the wait (the request's task is cancelled); a stop of the
    /// daemon ends it with `shutting_down`.
    func waitReady() async throws(ControlError) -> JSONValue {
        let timeout = try readyTimeout()
        let readiness = services.readiness
        if !readiness.isReady {
            await withTaskGroup(of: Void.self) { group in
                group.addTask { try? await readiness.reached.wait() }
                group.addTask { try? await readiness.stopping.wait() }
                if let timeout { group.addTask { try? await Task.sleep(for: timeout) } }
                // The first to end (ready, the timeout, or the connection's cancellation) ends both.
                await group.next()
                group.cancelAll()
            }
        }
        let snapshot = readiness.snapshot()
        if !snapshot.ready, readiness.stopping.current != nil { throw .shuttingDown }
        guard snapshot.ready else { throw .notReady(snapshot.missing.joined(separator: "; ")) }
        return snapshot.json
    }

    /// `timeout`: a duration text (`"30s"`, `"30m"`) or a number of seconds, at most a day.
    private func readyTimeout() throws(ControlError) -> Duration? {
        let duration: Duration
        switch request.value("timeout") {
        case nil, .null?: return nil
        case .string(let text)?:
            do {
                duration = try Duration.parsing(text)
            } catch {
                throw .invalidArgument(field: "timeout", reason: "\(error)")
            }
        case let value?:
            guard let seconds = value.doubleValue, seconds.isFinite else {
                throw .invalidArgument(field: "timeout", reason: "a duration such as \"30s\" or a number of seconds")
            }
            duration = .milliseconds(Int64((max(0, min(seconds, 86_400)) * 1000).rounded()))
        }
        guard duration >= .zero, duration <= Self.longestReadyWait else {
            throw .invalidArgument(field: "timeout", reason: "from 0 to 1d")
        }
        return duration
    }
}
