import NIOConcurrencyHelpers

/// A value set once, awaited by any number of tasks.
final class OneShot<Value: Sendable>: Sendable {
    private struct State {
        var value: Value?
        var waiters: [CheckedContinuation<Value, Never>] = []
    }
    private let state = NIOLockedValueBox(State())

    var current: Value? { state.withLockedValue { $0.value } }

    func fulfil(_ value: Value) {
        let waiters = state.withLockedValue { state in
            state.value = value
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume(returning: value) }
    }

    var value: Value {
        get async {
            await withCheckedContinuation { continuation in
                let ready: Value? = state.withLockedValue { state in
                    if let value = state.value { return value }
                    state.waiters.append(continuation)
                    return nil
                }
                if let ready { continuation.resume(returning: ready) }
            }
        }
    }
}
