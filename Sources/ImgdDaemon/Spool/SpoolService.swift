import Dispatch
import ImgdCore
import ImgdNetwork
import ImgdStore
import Logging
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The spool: claims the link lists dropped into it, warms the cache with their URLs, and
/// reports on each when it is done.
///
/// - **Claiming** (see ``SpoolWatcher`` for when a name is noticed) is ``ListClaimer``'s, on its
///   own queue: the list's URLs go into the state database (``ListStore``), its file to
///   `.claimed/`, and then the list is handed here. A claim that did not complete (a crash, a
///   stop) is dropped at the next start, and its file, still in the spool, claimed anew.
/// - **Warming**: at most ``WarmingLimits/maxActiveLists`` lists at once; the others wait,
///   claimed, and start in claim order as those finish (``turns``). Each list being warmed
///   feeds the downloader a window of URLs at a time, read from the database in list order, the
///   windows together within `max-queued` and `max-queued-bytes` (``WarmingLimits``); each list
///   is its own submitter, so lists take turns (a huge list cannot starve a small one) and
///   on-demand `get`s go before all of them. Outcomes are written back in batches (every 100 ms
///   or 1,000 outcomes).
/// - **Finishing**: when no URL is pending, the list's report (`NAME.report.json`,
///   ``ListReportWriter``, written as a stream) is written and the file moved to `done/` (all
///   cached) or `failed/` (any failure or cancelled). Then ``ListPruner``, on its own queue,
///   drops the lists beyond the last 100 finished from the database.
///
/// An actor on its own serial queue (``QueueExecutor``): its work reads and writes the state
/// database, which blocks, so it stays off the cooperative pool. Callbacks that are not async
/// (the downloader's answers, on its transfer thread; the claimer's hand-over) reach it by
/// enqueueing on that queue and running isolated there; the downloader's answers come over in
/// batches (`answers`, behind its lock). Claims run on the claimer's queue, so a long one holds
/// up none of this. The watcher, the claimer and the pruner are actors on queues of their own.
public actor SpoolService {
    /// Outcomes written in one transaction, at most; and how long one waits to be written.
    static let flushCount = 1000
    static let flushDelay = DispatchTimeInterval.milliseconds(100)

    nonisolated let folders: SpoolFolders
    nonisolated let reports: ListReportWriter
    nonisolated let pruner: ListPruner
    /// Made by ``start()`` (its callback needs the started service), with the latest limits.
    var claimer: ListClaimer?
    var limits: SpoolLimits
    /// How many lists are warmed at once and how many URLs they hold; a reload may change it.
    var warming: WarmingLimits
    nonisolated let store: ListStore
    nonisolated let downloader: Downloader
    nonisolated let disk: DiskCache
    nonisolated let logger: Logger
    nonisolated let onEvent: @Sendable (SpoolEvent) -> Void
    nonisolated let executor = QueueExecutor(label: "imgd.spool")
    var watcher: SpoolWatcher?
    /// Answers from the downloader, which calls back on its transfer thread, waiting for the
    /// queue: they are handed over in batches — one hop for all that arrived while the queue was
    /// busy — not one hop (and often one thread wake-up) per URL.
    nonisolated let answers = Locked<[(list: Int, url: ImageURL, result: Result<CachedImage, DownloadError>)]>([])

    public nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

    /// The lists being warmed (``Turns/warmed``), and for a moment one cancelled before its turn.
    var runs: [Int: ListRun] = [:]
    /// Which lists have a turn: written only on the spool's queue, each change in one step (a
    /// list that starts leaves `waiting` and counts in `warmed` at once), so `status` and
    /// `lists`, which read it from any thread (hence the lock), never see a list twice or more
    /// lists warmed than the cap.
    nonisolated let turns = Locked(Turns())

    /// The lists that have a turn, and those waiting for one.
    struct Turns {
        /// Lists in `runs` that took a turn (all but those cancelled before theirs, which finish
        /// at once), until they finish: at most ``WarmingLimits/activeLists`` (and, after a
        /// reload lowered it, those already warmed).
        var warmed = 0
        /// Claimed lists waiting for a turn, in the order they start; each its record as it was
        /// when it began waiting (its URLs stay in the database).
        var waiting: [ListRecord] = []
        /// Which calendar windows are open, for lists held to them.
        var gate = ListWindowGate.none
        /// Lists in `runs` paused by their window's close (no turn; their queued URLs held).
        var paused: Set<Int> = []
        /// How the lists with a deadline being warmed stand (``DeadlineTracker``), for `lists`.
        var estimates: [Int: DeadlineEstimate] = [:]

        /// The first waiting list that may take a turn now (not held to a closed window).
        var hasStartableWaiting: Bool { waiting.contains { gate.holding($0.name).isEmpty } }
    }
    var outcomes: [(list: Int, seq: Int, outcome: ListURLOutcome)] = []
    var pins: [(key: CacheKey, until: Int)] = []
    var flushScheduled = false
    var stopping = false
    /// Whether a look at the deadlines is due (``checkDeadlines()``, every second while a list
    /// with one is warmed).
    var deadlineCheckScheduled = false
    /// Failures of the state database (or of the index's pins) not yet overcome, and the retry.
    var stateTrouble = StateTrouble()
    /// Whether names the watcher reports go to the claimer: not before the lists of the last run
    /// are resumed (read from the watcher's queue).
    nonisolated let claimsOpen = Atomic<Bool>(false)
    /// Whether the last read of ``progress`` failed (it is read from any thread).
    nonisolated let progressReadFailing = Atomic<Bool>(false)

    /// A list being warmed.
    struct ListRun {
        let id: Int
        let name: String
        let submitter: SubmitterID
        let pinMilliseconds: Int?
        /// Whose namespace its items' chosen keys are in (``ListRecord/keyOwner``).
        let keyOwner: UInt32
        /// Its `# refresh:` rule, for the items without their own.
        var refresh: RefreshRule? = nil
        /// The last seq read from the database; the next read starts after it.
        var cursor = 0
        /// The same for the items marked `high`, which are read first; nil once they are all read.
        var highCursor: Int? = 0
        /// The last item read of those whose signed URL states an expiry, read soonest first after
        /// the `high` ones and before the rest (its expiry and seq; nil before the first read).
        var expiringCursor: (expiresAt: Int, seq: Int)? = nil
        /// True once every pending item with an expiry has been read.
        var expiringRead = false
        /// Seqs handed to the downloader with their item's own pin, by normalised URL (a URL may
        /// appear twice in a list).
        var inFlight: [String: [(seq: Int, pin: Int?)]] = [:]
        var outstanding = 0
        /// The bytes of their URLs (as the downloader counts them: the normalised URL's).
        var outstandingBytes = 0
        /// True once every pending URL has been read.
        var exhausted = false
        var cancelled = false
        /// Whether it took a turn (counts in ``Turns/warmed``): false for a list cancelled before
        /// its turn came, which finishes at once.
        var tookTurn = true
        /// Paused: its calendar window closed while it was warmed (see ``Turns/paused``).
        var paused = false
        /// Its deadline's estimate, when it has one, and the URLs pending when its run began
        /// (what is left is that less those settled since).
        var deadline: DeadlineTracker? = nil
        var pendingAtStart = 0
        /// The weight its submitter was last given (``DeadlineTracker/weight(now:)``).
        var weight = 1
        /// Its final state and time, once a finish was first tried (kept for a retry of it).
        var finishing: (state: ListState, at: Int)?
    }

    /// Opens the spool at `path` (creating its folders) and the state database at `store`.
    public init(
        path: String, store: ListStore, limits: SpoolLimits = SpoolLimits(), warming: WarmingLimits = WarmingLimits(),
        downloader: Downloader, disk: DiskCache, logger: Logger, onEvent: @escaping @Sendable (SpoolEvent) -> Void
    ) throws(SpoolError) {
        folders = try SpoolFolders(path: path, logger: logger)
        reports = ListReportWriter(folders: folders, store: store, logger: logger)
        pruner = ListPruner(store: store, logger: logger)
        self.store = store
        self.downloader = downloader
        self.disk = disk
        self.logger = logger
        self.onEvent = onEvent
        self.limits = limits
        self.warming = warming
    }

    /// Runs `body` isolated to the spool, on its queue, after what was enqueued before: how
    /// callbacks that are not async hand it work.
    nonisolated func onExecutor(_ body: @escaping @Sendable (isolated SpoolService) -> Void) {
        executor.enqueue { [self] in assumeIsolated(body) }
    }

    /// Resumes the lists a previous run left, then starts watching (taking what is already in the spool).
    public func start() async throws(SpoolError) {
        let claimer = ListClaimer(
            folders: folders, store: store, reports: reports, pruner: pruner, limits: limits, downloader: downloader, logger: logger,
            onEvent: onEvent,
            onClaimed: { [unowned self] record, cancelled in onExecutor { $0.claimed(record, cancelled: cancelled) } })
        self.claimer = claimer
        let watcher = SpoolWatcher(folder: folders.path) { [unowned self] name in
            if claimsOpen.load(ordering: .relaxed) { claimer.claim(name) }
        }
        // Before any claim: the half-made claims of the last run are dropped before their files
        // are claimed anew, and its lists resumed before new ones are admitted. When the state
        // database cannot be read now, claims stay closed (names seen are dropped) until the
        // retry pass resumes them; it then opens claims and looks at the whole spool again.
        resume()
        if !stateTrouble.resumeMissed { claimsOpen.store(true, ordering: .relaxed) }
        self.watcher = watcher
        // What the last run left to prune (abandoned claims included), off the start path.
        pruner.schedule()
        try await watcher.start()
    }

    /// Stops taking lists and writes every outcome received; lists in progress stay active in the
    /// database and resume at the next start. Call before the downloader shuts down: the
    /// cancellations that follow are not recorded as failures.
    public func stop() async {
        stopping = true
        await watcher?.stop()
        await claimer?.stop()
        await pruner.stop()
        flush(evenWhileFailing: true)
    }

    /// Writes what the downloader's shutdown answered (nothing is recorded as failed by it).
    public func finalFlush() {
        flush(evenWhileFailing: true)
    }
}
