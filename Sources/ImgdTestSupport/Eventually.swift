/// Polls `condition` every few milliseconds until it holds or `timeout` passes; returns whether
/// it held. For states that raise no event a test could wait on, instead of a fixed sleep.
///
/// The default deadline is generous: the whole suite runs in parallel on 2 cores, where a task
/// may wait seconds for a thread, and a condition that holds returns at once anyway. A test
/// that bounds how long something may take says so with its own `timeout`.
public func eventually(timeout: Duration = .seconds(30), _ condition: () -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if condition() { return true }
        try? await Task.sleep(for: .milliseconds(5))
    }
    return condition()
}
