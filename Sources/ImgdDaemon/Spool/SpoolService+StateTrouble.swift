import Dispatch
import ImgdCore
import Logging

/// When the state database fails (a full or read-only filesystem under it, an I/O error): the
/// spool keeps in memory what it could not write, reads again what it could not read, and tries
/// again every second until the database answers — a list is neither finished on a failed
/// read nor left waiting for an event that will not come. The failure is logged once, with its
/// cause, and its end once; meanwhile no new URL of any list is handed to the downloader (the
/// outcomes of those already out are kept to be written).
extension SpoolService {
    /// How long after a failure the spool tries again.
    static let stateRetryDelay = DispatchTimeInterval.seconds(1)

    /// The spool's view of its database's health.
    struct StateTrouble {
        /// A write or read failed since the last pass that did everything.
        var isFailing = false
        /// The failure was logged and its end not yet.
        var isAnnounced = false
        /// A retry pass is due.
        var isRetryScheduled = false
        /// The claimed lists of the last run could not be read at start.
        var resumeMissed = false
    }

    /// Notes that `what` failed with `error`: logged once until the database works again (a
    /// ``retryAfterStateFailure()`` pass that fails nothing); a retry pass is scheduled.
    func stateFailed(_ what: @autoclosure () -> String, _ error: some Error, list: String? = nil) {
        stateTrouble.isFailing = true
        if !stateTrouble.isAnnounced {
            stateTrouble.isAnnounced = true
            (list.map(logger.forList) ?? logger).error("\(what()) failed: \(error); lists wait, and imgd tries again every second")
        }
        scheduleStateRetry()
    }

    private func scheduleStateRetry() {
        guard !stateTrouble.isRetryScheduled, !stopping else { return }
        stateTrouble.isRetryScheduled = true
        executor.queue.asyncAfter(deadline: .now() + Self.stateRetryDelay) { [self] in
            assumeIsolated { $0.retryAfterStateFailure() }
        }
    }

    /// One pass over everything a failure may have left undone: the lists of the last run, the
    /// outcomes and pins kept, the windows, the lists with nothing pending.
    func retryAfterStateFailure() {
        stateTrouble.isRetryScheduled = false
        guard !stopping else { return }
        stateTrouble.isFailing = false
        if stateTrouble.resumeMissed {
            resume()
            if !stateTrouble.resumeMissed {
                // Claims open only now: what was dropped meanwhile is in the spool, looked at again.
                claimsOpen.store(true, ordering: .relaxed)
                let watcher = watcher
                Task { await watcher?.rescan() }
            }
        }
        flush(evenWhileFailing: true)
        if !stateTrouble.isFailing { pump() }
        for id in runs.keys.sorted() where !stateTrouble.isFailing { finishIfDone(id) }
        if !stateTrouble.isFailing, stateTrouble.isAnnounced {
            stateTrouble.isAnnounced = false
            logger.notice("the state database answers again: lists go on")
        }
    }
}
