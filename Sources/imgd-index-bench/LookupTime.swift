/// What one lookup took (seconds), and where the time went.
struct LookupTime {
    /// Elapsed time.
    var wall: Double
    /// Time the thread ran on a CPU.
    var cpu: Double
    /// Time the thread was runnable but another thread or process had the CPU.
    var runQueue: Double
    /// True when the thread gave up the CPU itself (a lock, a disk read) at least once.
    var blocked: Bool

    /// Where the time of a slow lookup went, by its largest part.
    enum Cause: CaseIterable {
        /// On the CPU: real work (or host time the guest counts as the thread's).
        case work
        /// Runnable, waiting for a CPU: preempted by another thread or process.
        case waitingForCPU
        /// Asleep until a lock was released or a disk read completed.
        case blocked
        /// Neither running, runnable nor asleep as the guest sees it: the host did not run the
        /// virtual CPU (steal time).
        case stolen
    }

    /// The cause of a lookup that took longer than `threshold`: work when its CPU time alone is
    /// over it, otherwise the larger of the run-queue wait and the rest.
    func cause(threshold: Double) -> Cause {
        if cpu > threshold { return .work }
        let waiting = min(runQueue, wall - cpu)
        let rest = wall - cpu - waiting
        if waiting >= rest { return .waitingForCPU }
        return blocked ? .blocked : .stolen
    }
}

/// Lookups over a threshold, counted by cause.
struct SlowLookups {
    let threshold: Double
    private(set) var count = 0
    private var byCause: [LookupTime.Cause: Int] = [:]

    init(_ times: [LookupTime], over threshold: Double) {
        self.threshold = threshold
        for time in times where time.wall > threshold {
            count += 1
            byCause[time.cause(threshold: threshold), default: 0] += 1
        }
    }

    subscript(cause: LookupTime.Cause) -> Int { byCause[cause] ?? 0 }

    /// "count (work / waiting for a CPU / blocked / stolen)".
    var text: String {
        "\(count) (\(LookupTime.Cause.allCases.map { String(self[$0]) }.joined(separator: " / ")))"
    }
}
