/// Polls `state` (which may talk to the daemon) until it is done, failing once its progress (a
/// count that grows while the daemon works, such as a claim's lines) has not grown for `stall`,
/// or once `limit` has passed in all: a loaded machine takes longer, a stuck daemon still fails,
/// and a daemon that creeps forward forever fails too. Returns whether it got done (false as
/// well when the task is cancelled, rather than polling on without a pause).
///
/// Both clocks count only the time the poller was able to run, as ``eventually(timeout:interval:_:)``'s
/// does (``PollDeadline``): a pause that comes back late by starvation moves the `limit` and
/// the start of the current stall alike.
public func eventuallyWhileProgressing(
    stall: Duration = .seconds(30), limit: Duration = .seconds(600), interval: Duration = .milliseconds(100),
    _ state: () async throws -> (progress: Int, done: Bool)
) async -> Bool {
    var deadline = PollDeadline(timeout: limit, interval: interval)
    var best = Int.min
    var lastGrowth = ContinuousClock.now
    while true {
        if let now = try? await state() {
            if now.done { return true }
            if now.progress > best {
                best = now.progress
                lastGrowth = .now
            }
        }
        if ContinuousClock.now - lastGrowth > stall || deadline.hasPassed() { return false }
        let grantedBefore = deadline.granted
        guard await deadline.pause() else { return false }
        lastGrowth += deadline.granted - grantedBefore
    }
}
