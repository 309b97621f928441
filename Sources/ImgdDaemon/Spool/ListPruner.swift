import Dispatch
import ImgdCore
import Logging
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Keeps the state database bounded: after a list finishes (and at start) it retires the
/// finished lists beyond the last ``ListStore/keptFinishedLists``, deletes the URL rows of
/// retired and abandoned lists a batch at a time, and gives the freed pages back to the
/// filesystem. It runs on its own serial queue and takes the database's lock for one batch at
/// a time, so claims, outcomes and `lists` go on between batches (the budgeted passes of
/// nginx's cache manager).
///
/// An actor on its own serial queue (``QueueExecutor``, utility QoS): a pass blocks on SQLite and
/// sleeps between batches, so it stays off the cooperative pool. Requests for a pass come from
/// code that is not async (the claimer's queue) and are enqueued there; ``stop()`` sets a flag
/// the pass reads between batches (an atomic: the pass holds the actor while it runs).
actor ListPruner {
    /// URL rows deleted in one transaction (a few milliseconds' hold of the database).
    static let batchRows = 5000
    /// Free pages given back in one step (8 MiB of 4 KiB pages).
    static let batchPages = 2048

    private let store: ListStore
    private let logger: Logger
    private nonisolated let executor = QueueExecutor(label: "imgd.spool-prune", qos: .utility)
    /// True while a pass is queued and not yet started: more requests join it.
    private nonisolated let passQueued = Atomic<Bool>(false)
    private nonisolated let stopRequested = Atomic<Bool>(false)

    nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

    init(store: ListStore, logger: Logger) {
        self.store = store
        self.logger = logger
    }

    /// Asks for a pass (after a list finished, or a claim was abandoned). Requests made before
    /// the queued pass starts are served by it.
    nonisolated func schedule() {
        guard !passQueued.exchange(true, ordering: .acquiringAndReleasing) else { return }
        executor.enqueue { [self] in
            passQueued.store(false, ordering: .releasing)
            assumeIsolated { $0.pass() }
        }
    }

    /// Drops a claim that did not complete (its row at once, its URL rows with the pass this
    /// asks for), on the caller's thread. If the state database refuses, the half-made claim
    /// stays, harmless: the next start drops it.
    nonisolated func dropHalfMadeClaim(_ record: ListRecord) {
        do {
            try store.abandonClaim(list: record.id)
        } catch {
            logger.forList(record.name).warning(
                "cannot drop the list's half-made claim from the state database, ignoring (the next start drops it): \(error)")
        }
        schedule()  // its rows
    }

    /// Stops between batches; returns once no pass runs (after the one in progress and those
    /// queued, which return at once). What was not pruned is at the next start.
    /// (Not isolated: the flag is set at once, while a pass holds the actor.)
    nonisolated func stop() async {
        stopRequested.store(true, ordering: .relaxed)
        await idle()
    }

    /// Nothing: run on the queue after what was enqueued before, it tells that all of it is done.
    private func idle() {}

    private nonisolated var isStopping: Bool { stopRequested.load(ordering: .relaxed) }

    private func pass() {
        guard !isStopping else { return }
        do {
            let retired = try store.retireFinishedLists()
            var batches = 0
            while !isStopping, try store.pruneBatch(limit: Self.batchRows) {
                batches += 1
                pause()
            }
            guard !isStopping else { return }
            if batches > 0 || retired > 0, !store.reclaimsSpace {
                convert()
            }
            while !isStopping, try store.reclaimSpace(pages: Self.batchPages) { pause() }
            if batches > 0 || retired > 0 { try store.checkpoint() }
        } catch {
            logger.warning("cannot prune finished lists from the state database (will try after the next list): \(error)")
        }
    }

    /// A breath between batches: the database's lock is not fair, and a thread waiting for it
    /// (a claim's slice, a batch of outcomes, `lists`) gets it here rather than after the pass.
    private func pause() {
        usleep(1000)
    }

    /// A database made before pruning existed cannot give pages back: rewritten once, now that
    /// only the kept lists are in it.
    private func convert() {
        let started = ContinuousClock.now
        do {
            let before = try store.size()
            try store.convertToIncrementalVacuum()
            let after = try store.size()
            logger.notice("""
                state database rewritten to give freed space back (once): \(before.used + before.free) bytes before, \
                \(after.used + after.free) after, in \(ContinuousClock.now - started)
                """)
        } catch {
            logger.warning("cannot rewrite the state database to give freed space back: \(error); freed space is reused")
        }
    }
}
