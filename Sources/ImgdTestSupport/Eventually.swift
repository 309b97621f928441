/// Polls `condition` every `interval` until it holds or `timeout` passes; returns whether it
/// held. For states that raise no event a test could wait on, instead of a fixed sleep.
///
/// The default deadline is generous: the whole suite runs in parallel on 2 cores, where a task
/// may wait seconds for a thread, and a condition that holds returns at once anyway. A test
/// that bounds how long something may take says so with its own `timeout`.
///
/// The deadline counts the time the poller was able to run (``PollDeadline``): starvation
/// moves it, up to `timeout` again in all, so a real hang still ends within twice the
/// `timeout`. The condition is asked once more after the deadline (or a cancellation) before
/// giving up.
public func eventually(
    timeout: Duration = .seconds(30), interval: Duration = .milliseconds(5), _ condition: () -> Bool
) async -> Bool {
    var deadline = PollDeadline(timeout: timeout, interval: interval)
    while !deadline.hasPassed() {
        if condition() { return true }
        guard await deadline.pause() else { break }
    }
    return condition()
}

/// ``eventually(timeout:interval:_:)`` for a condition that awaits (one that talks to a daemon,
/// say) or throws; a thrown error counts as "not yet". Polls every 20 ms by default: each
/// check may cost a connection.
public func eventually(
    timeout: Duration = .seconds(30), interval: Duration = .milliseconds(20), _ condition: () async throws -> Bool
) async -> Bool {
    var deadline = PollDeadline(timeout: timeout, interval: interval)
    while !deadline.hasPassed() {
        if (try? await condition()) == true { return true }
        guard await deadline.pause() else { break }
    }
    return (try? await condition()) == true
}
