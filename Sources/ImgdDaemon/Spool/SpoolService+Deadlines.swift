import Dispatch
import ImgdCore
import ImgdNetwork

/// Deadlines: a list that says when it must be ready (``ListRecord/readyBy``) has its finish
/// estimated every second while it is warmed (``DeadlineTracker``); one at risk gets a larger
/// share of the transfer slots (its submitter's weight), and the change is an `at_risk` or
/// `on_track` event. Among a waiting owner's lists, the one whose deadline comes first takes
/// the turn (``startWaiting()``).
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
    ///
    /// What is left of a list is read from the state database (less the outcomes not written
    /// yet), so URLs a `retry` requeued, or rows found unusable, count as they should.
    func checkDeadlines() {
        guard !stopping else { return }
        let now = WallClock.nowMilliseconds()
        var pendingByList: [Int: Int] = [:]
        if runs.values.contains(where: { $0.deadline != nil }), let records = try? store.lists(finishedLimit: 0) {
            for record in records { pendingByList[record.id] = record.pending }
            for outcome in outcomes { pendingByList[outcome.list, default: 0] -= 1 }
        }
        var estimates: [Int: DeadlineEstimate] = [:]
        for id in runs.keys.sorted() {
            guard var run = runs[id], var tracker = run.deadline else { continue }
            if run.paused || run.cancelled {
                // Held to its window (or cancelled): no rate while it may not run, no larger share.
                tracker.restartRate()
                run.deadline = tracker
                runs[id] = run
                continue
            }
            let remaining = max(0, pendingByList[id] ?? (run.pendingAtStart - tracker.settled))
            let change = tracker.update(now: now, remaining: remaining)
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
            run.deadline = tracker
            runs[id] = run
        }
        for id in setDeadlineWeights(now: now) { estimates[id]?.boosted = true }
        turns.withLock { $0.estimates = estimates }
        guard runs.values.contains(where: { $0.deadline != nil && !$0.cancelled }), !deadlineCheckScheduled else { return }
        deadlineCheckScheduled = true
        executor.queue.asyncAfter(deadline: .now() + Self.deadlineCheckInterval) { [self] in
            assumeIsolated { spool in
                spool.deadlineCheckScheduled = false
                spool.checkDeadlines()
            }
        }
    }

    /// Gives the larger share to at most one list per owner: of an owner's lists at risk (and
    /// warmed, before their deadline), the one whose deadline comes first. One member's
    /// deadlines thus take from the others at most what one list at risk may, however many
    /// lists that member gives a deadline; every other list weighs 1.
    /// Returns the lists boosted.
    private func setDeadlineWeights(now: Int) -> Set<Int> {
        var chosen: [UInt32: (id: Int, readyBy: Int)] = [:]
        for (id, run) in runs where !run.paused && !run.cancelled {
            guard let tracker = run.deadline, tracker.weight(now: now) > 1 else { continue }
            if let other = chosen[run.keyOwner], (other.readyBy, other.id) < (tracker.readyBy, id) { continue }
            chosen[run.keyOwner] = (id, tracker.readyBy)
        }
        let boosted = Set(chosen.values.map(\.id))
        for id in runs.keys.sorted() {
            guard let run = runs[id] else { continue }
            let weight = boosted.contains(id) ? DeadlineTracker.boostWeight : 1
            guard weight != run.weight else { continue }
            runs[id]!.weight = weight
            downloader.weigh(run.submitter, weight)
        }
        return boosted
    }

    /// Stops following a list that finished: its estimate leaves `lists`, its weight goes back.
    func stopFollowingDeadline(of run: ListRun) {
        guard run.deadline != nil else { return }
        turns.withLock { _ = $0.estimates.removeValue(forKey: run.id) }
        if run.weight != 1 { downloader.weigh(run.submitter, 1) }
    }
}
