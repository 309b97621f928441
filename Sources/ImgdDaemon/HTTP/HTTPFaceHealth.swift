import ImgdCore
import Synchronization

/// `/healthz`: whether the daemon's loops turn. One probe at a time goes round the engine's
/// loop and the spool's queue (the watchdog's probe); requests meanwhile wait for it, and its
/// answer stands for a second, so a monitor polling hard costs the loops one probe a second.
final class HTTPFaceHealth: Sendable {
    /// How long a loop may take to answer before it is called stuck.
    static let probeTimeout: Duration = .seconds(1)
    /// How long an answer stands.
    static let answerLifetime: Duration = .seconds(1)

    private struct State {
        var probe: Task<String?, Never>?
        var answeredAt: ContinuousClock.Instant?
        var answer: String?
    }

    private let state = Locked(State())
    private let probeLoops: @Sendable () async -> String?

    /// `probeLoops` returns nil when every loop answered, else which did not.
    init(probeLoops: @escaping @Sendable () async -> String?) {
        self.probeLoops = probeLoops
    }

    func check() async -> HTTPFaceResponse {
        let now = ContinuousClock.now
        let probe: Task<String?, Never> = state.withLock { state in
            if let answeredAt = state.answeredAt, now - answeredAt < Self.answerLifetime {
                let answer = state.answer
                return Task { answer }
            }
            if let probe = state.probe { return probe }
            let probe = Task { [probeLoops] in await probeLoops() }
            state.probe = probe
            return probe
        }
        let stuck = await probe.value
        state.withLock { state in
            if state.probe != nil {
                state.probe = nil
                state.answeredAt = .now
                state.answer = stuck
            }
        }
        if let stuck { return .text("stuck: \(stuck) did not answer within \(Self.probeTimeout.components.seconds) s\n", status: .serviceUnavailable) }
        return .text("ok\n")
    }

    /// Awaits `work`, at most `timeout`: whether it finished in time. The work goes on in the
    /// background if it did not (a stuck loop cannot be cancelled, so it is not waited for).
    static func answers(within timeout: Duration, _ work: @escaping @Sendable () async -> Void) async -> Bool {
        return await withCheckedContinuation { (done: CheckedContinuation<Bool, Never>) in
            let first = FirstAnswer(done)
            Task {
                await work()
                first.give(true)
            }
            Task {
                try? await Task.sleep(for: timeout)
                first.give(false)
            }
        }
    }
}

/// Resumes a continuation with the first answer given; later ones are dropped.
private final class FirstAnswer: Sendable {
    private let continuation: Locked<CheckedContinuation<Bool, Never>?>

    init(_ continuation: CheckedContinuation<Bool, Never>) {
        self.continuation = Locked(continuation)
    }

    func give(_ answer: Bool) {
        continuation.withLock { continuation in
            continuation?.resume(returning: answer)
            continuation = nil
        }
    }
}
