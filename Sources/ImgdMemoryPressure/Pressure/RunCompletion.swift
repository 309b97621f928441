import ImgdCore

/// Hands the monitor thread's outcome to the task waiting in ``MemoryPressureMonitor/run(onWatching:)``,
/// whichever of the two gets there first. The first ``finish(_:)`` wins; later ones are ignored.
final class RunCompletion: Sendable {
    typealias Outcome = Result<Void, MemoryPressureError>

    private enum Stage {
        case pending
        case waiting(CheckedContinuation<Outcome, Never>)
        case finished(Outcome)
    }

    /// Guards the stage: the thread finishes while the task may be starting to wait.
    private let stage = Locked(Stage.pending)

    /// Suspends until ``finish(_:)`` is called (or returns at once if it was). One waiter only.
    func wait() async -> Outcome {
        await withCheckedContinuation { continuation in
            let ready: Outcome? = stage.withLock { stage in
                switch stage {
                case .pending:
                    stage = .waiting(continuation)
                    return nil
                case .finished(let outcome):
                    return outcome
                case .waiting:
                    preconditionFailure("RunCompletion has one waiter")
                }
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }

    /// Records the outcome and wakes the waiter, if any.
    func finish(_ outcome: Outcome) {
        let waiter: CheckedContinuation<Outcome, Never>? = stage.withLock { stage in
            switch stage {
            case .pending:
                stage = .finished(outcome)
                return nil
            case .waiting(let continuation):
                stage = .finished(outcome)
                return continuation
            case .finished:
                return nil
            }
        }
        waiter?.resume(returning: outcome)
    }
}
