import Dispatch
import ImgdCore
import ImgdNetwork

/// Deadlines: a list that says when it must be ready (``ListRecord/readyBy``) has its finish
/// estimated every second while it is warmed (``DeadlineTracker``); one at risk gets a larger
/// share of the transfer slots (its submitter's weight), and the change is an `at_risk` or
/// `on_track` event. Waiting lists with a deadline to come take their turn before the others
/// (``startWaiting()``).
extension SpoolService {
    /// How often the estimates are looked at.
    static let deadlineCheckInterval = DispatchTimeInterval.seconds(1)

    /// Starts following `id`'s deadline, when its record has one (its run was just made).
    func followDeadline(of record: ListRecord) {
        guard let readyBy = record.readyBy, runs[record.id] != nil, !runs[record.id]!.cancelled else { return }
        runs[record.id]!.deadline = DeadlineTracker(readyBy: readyBy, remaining: record.pending)
        runs[record.id]!.pendingAtStart = record.pending
        checkDeadlines()
    }

    /// Takes a sample of every followed list, publishes what changed (estimates for `lists`,
    /// events, submitter weights), and looks again in a second while any is followed.
    func checkDeadlines() {
        guard !stopping else { return }
        let now = WallClock.nowMilliseconds()
        var estimates: [Int: DeadlineEstimate] = [:]
        for id in runs.keys.sorted() {
            guard var run = runs[id], var tracker = run.deadline, !run.cancelled else { continue }
            if run.paused {
                // Held to its window: no rate while it may not run.
                tracker.restartRate()
                run.deadline = tracker
                runs[id] = run
                continue
            }
            let change = tracker.update(now: now, remaining: max(0, run.pendingAtStart - tracker.settled))
            estimates[id] = tracker.estimate
            if let change {
                let estimate = tracker.estimate
                let eta = estimate.eta.map { URLExpiry.iso8601(milliseconds: $0) } ?? "unknown (nothing settles)"
                switch change {
                case .atRisk:
                    logger.forList(run.name).notice(
                        "list at risk: \(estimate.remaining) URLs left, estimated to finish at \(eta), after its deadline \(URLExpiry.iso8601(milliseconds: tracker.readyBy))")
                case .onTrack:
                    logger.forList(run.name).info(
                        "list on track again: estimated to finish at \(eta), before its deadline \(URLExpiry.iso8601(milliseconds: tracker.readyBy))")
                }
                onEvent(.deadline(name: run.name, readyBy: tracker.readyBy, estimate: estimate))
            }
            let weight = tracker.weight(now: now)
            if weight != run.weight {
                run.weight = weight
                downloader.weigh(run.submitter, weight)
            }
            run.deadline = tracker
            runs[id] = run
        }
        turns.withLock { $0.estimates = estimates }
        guard !estimates.isEmpty || runs.values.contains(where: { $0.deadline != nil && !$0.cancelled }),
            !deadlineCheckScheduled
        else { return }
        deadlineCheckScheduled = true
        executor.queue.asyncAfter(deadline: .now() + Self.deadlineCheckInterval) { [self] in
            assumeIsolated { spool in
                spool.deadlineCheckScheduled = false
                spool.checkDeadlines()
            }
        }
    }

    /// Stops following a list that finished: its estimate leaves `lists`, its weight goes back.
    func stopFollowingDeadline(of run: ListRun) {
        guard run.deadline != nil else { return }
        turns.withLock { _ = $0.estimates.removeValue(forKey: run.id) }
        if run.weight != 1 { downloader.weigh(run.submitter, 1) }
    }
}
