/// Polls `condition` every few milliseconds until it holds or `timeout` passes; returns whether
/// it held. For states that raise no event a test could wait on, instead of a fixed sleep.
public func eventually(timeout: Duration = .seconds(5), _ condition: () -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if condition() { return true }
        try? await Task.sleep(for: .milliseconds(5))
    }
    return condition()
}
