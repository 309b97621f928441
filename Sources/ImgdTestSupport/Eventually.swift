/// Polls `condition` every few milliseconds until it holds or `timeout` passes; returns whether
/// it held. For states that raise no event a test could wait on, instead of a fixed sleep.
///
/// The default deadline is generous: the whole suite runs in parallel on 2 cores, where a task
/// may wait seconds for a thread, and a condition that holds returns at once anyway. A test
/// that bounds how long something may take says so with its own `timeout`.
///
/// The deadline counts the time the poller was able to run. When a 5 ms pause comes back late
/// by more than a quarter of a second, the process (or its cooperative pool) was starved, and
/// whatever the test waits for was most likely starved with it: that lateness is added to the
/// deadline, up to `timeout` again in all, so that a machine frozen for half a minute by the
/// rest of the suite does not fail a test whose subject never got a thread, while a real hang
/// still ends within twice the `timeout`.
public func eventually(timeout: Duration = .seconds(30), _ condition: () -> Bool) async -> Bool {
    let clock = ContinuousClock()
    let pause = Duration.milliseconds(5)
    let lateness = Duration.milliseconds(250)
    var deadline = clock.now + timeout
    var granted = Duration.zero
    while clock.now < deadline {
        if condition() { return true }
        let asleep = clock.now
        try? await Task.sleep(for: pause)
        let late = clock.now - asleep - pause
        if late > lateness, granted < timeout {
            let added = min(late, timeout - granted)
            granted += added
            deadline += added
        }
    }
    return condition()
}
