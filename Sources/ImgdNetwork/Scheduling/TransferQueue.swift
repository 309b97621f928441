import DequeModule

/// The jobs waiting for a transfer slot, in the order they should start.
///
/// Two rules decide the order: a higher ``FetchPriority`` always goes first; within a priority,
/// submitters take turns (round-robin), each in its own FIFO order. A prefetch submitter given a
/// weight above 1 (``weigh(_:_:)``: a list at risk of missing its deadline) takes that many jobs
/// in a row at its turn. A job whose host is at its
/// cap (or backing off after a `Retry-After`) is passed over for one that can start, looking at
/// most ``scanWindow`` jobs deep into each submitter's queue so a blocked host costs bounded work.
///
/// Removal is lazy: a cancelled or re-prioritised job stays in its deque until it reaches the
/// front or is scanned, and is dropped then (`isLive` says whether an entry still counts).
struct TransferQueue<Job: AnyObject> {
    /// How far into one submitter's queue a host-blocked head is looked past.
    static var scanWindow: Int { 64 }

    private struct Level {
        var queues: [SubmitterID: Deque<Job>] = [:]
        /// Submitters with queued jobs, in turn order; `cursor` is whose turn is next.
        var order: [SubmitterID] = []
        var cursor = 0
        /// Jobs the submitter at `cursor` has taken in its turn so far (a weighted one takes more).
        var streak = 0

        mutating func insert(_ job: Job, submitter: SubmitterID, atFront: Bool) {
            if queues[submitter] == nil {
                queues[submitter] = Deque()
                // A new submitter waits for one full turn at most: it goes just before the cursor.
                order.insert(submitter, at: cursor)
                cursor += 1
                if cursor >= order.count { cursor = 0 }
            }
            if atFront { queues[submitter]!.prepend(job) } else { queues[submitter]!.append(job) }
        }

        mutating func next(
            isLive: (Job) -> Bool, canStart: (Job) -> Bool, held: Set<SubmitterID>, weights: [SubmitterID: Int], dropped: inout Int
        ) -> Job? {
            var turnsLeft = order.count
            while turnsLeft > 0, !order.isEmpty {
                turnsLeft -= 1
                if cursor >= order.count { cursor = 0 }
                let submitter = order[cursor]
                if !held.isEmpty, held.contains(submitter) {
                    cursor += 1
                    streak = 0
                    continue
                }
                let found = take(from: submitter, isLive: isLive, canStart: canStart, dropped: &dropped)
                if queues[submitter]!.isEmpty {
                    queues[submitter] = nil
                    order.remove(at: cursor)  // the next submitter slides into the cursor's place
                    streak = 0
                } else if found != nil, !weights.isEmpty, streak + 1 < weights[submitter, default: 1] {
                    streak += 1  // a weighted submitter keeps the turn for its next job
                } else {
                    cursor += 1
                    streak = 0
                }
                if let found { return found }
            }
            return nil
        }

        /// Takes the first job of `submitter` that may start, without moving the turn.
        mutating func next(
            of submitter: SubmitterID, isLive: (Job) -> Bool, canStart: (Job) -> Bool, dropped: inout Int
        ) -> Job? {
            guard queues[submitter] != nil else { return nil }
            let found = take(from: submitter, isLive: isLive, canStart: canStart, dropped: &dropped)
            if queues[submitter]!.isEmpty, let index = order.firstIndex(of: submitter) {
                queues[submitter] = nil
                order.remove(at: index)
                if index < cursor { cursor -= 1 } else if index == cursor { streak = 0 }
            }
            return found
        }

        private mutating func take(
            from submitter: SubmitterID, isLive: (Job) -> Bool, canStart: (Job) -> Bool, dropped: inout Int
        ) -> Job? {
            var index = 0
            var scanned = 0
            while scanned < TransferQueue.scanWindow, index < queues[submitter]!.count {
                let job = queues[submitter]![index]
                if !isLive(job) {
                    queues[submitter]!.remove(at: index)
                    dropped -= 1
                    continue
                }
                if canStart(job) {
                    queues[submitter]!.remove(at: index)
                    return job
                }
                index += 1
                scanned += 1
            }
            return nil
        }
    }

    private var levels: [Level] = FetchPriority.allCases.map { _ in Level() }
    /// Submitters whose prefetches wait (a list outside its calendar window): passed over at
    /// the prefetch level, never at the on-demand one (a `get` that joined such a job goes).
    private(set) var held: Set<SubmitterID> = []
    /// Prefetch submitters weighing more than 1 (``weigh(_:_:)``); empty in the common case.
    private(set) var weights: [SubmitterID: Int] = [:]
    /// Entries in all deques, dead ones included until dropped.
    private(set) var entryCount = 0

    /// Appends `job` to the end of `submitter`'s queue at `priority`.
    mutating func enqueue(_ job: Job, priority: FetchPriority, submitter: SubmitterID) {
        insert(job, priority: priority, submitter: submitter, atFront: false)
    }

    /// Puts `job` at the front of `submitter`'s queue (a retry goes before its list's later URLs).
    mutating func enqueueFirst(_ job: Job, priority: FetchPriority, submitter: SubmitterID) {
        insert(job, priority: priority, submitter: submitter, atFront: true)
    }

    /// Removes and returns the next job that may start, or nil when none can.
    /// - Parameters:
    ///   - isLive: false for entries to drop (cancelled, moved to another priority).
    ///   - canStart: false when the job's host has no free slot right now.
    mutating func next(isLive: (Job) -> Bool, canStart: (Job) -> Bool) -> Job? {
        for index in levels.indices.reversed() {
            if let job = levels[index].next(
                isLive: isLive, canStart: canStart, held: heldAt(index), weights: weightsAt(index), dropped: &entryCount)
            {
                entryCount -= 1
                return job
            }
        }
        return nil
    }

    /// Removes and returns the next job of `priority` that may start (submitters in turn), or of
    /// one `submitter` only; nil when none can.
    mutating func next(
        priority: FetchPriority, submitter: SubmitterID? = nil, isLive: (Job) -> Bool, canStart: (Job) -> Bool
    ) -> Job? {
        let found = if let submitter {
            levels[priority.rawValue].next(of: submitter, isLive: isLive, canStart: canStart, dropped: &entryCount)
        } else {
            levels[priority.rawValue].next(
                isLive: isLive, canStart: canStart, held: heldAt(priority.rawValue), weights: weightsAt(priority.rawValue),
                dropped: &entryCount)
        }
        if found != nil { entryCount -= 1 }
        return found
    }

    /// Whether `submitter`'s prefetches are held.
    func isHeld(_ submitter: SubmitterID) -> Bool { !held.isEmpty && held.contains(submitter) }

    /// Holds `submitter`'s prefetches (true) or lets them go again.
    mutating func hold(_ submitter: SubmitterID, _ isHeld: Bool) {
        if isHeld { held.insert(submitter) } else { held.remove(submitter) }
    }

    /// Gives `submitter` `weight` prefetch jobs in a row at each of its turns (1: one, as every
    /// submitter has until weighed).
    mutating func weigh(_ submitter: SubmitterID, _ weight: Int) {
        if weight > 1 { weights[submitter] = weight } else { weights[submitter] = nil }
    }

    /// `submitter`'s weight (1 unless weighed).
    func weight(of submitter: SubmitterID) -> Int { weights.isEmpty ? 1 : weights[submitter, default: 1] }

    private func weightsAt(_ level: Int) -> [SubmitterID: Int] {
        level == FetchPriority.prefetch.rawValue ? weights : [:]
    }

    private func heldAt(_ level: Int) -> Set<SubmitterID> {
        level == FetchPriority.prefetch.rawValue ? held : []
    }

    /// True when some entry (perhaps dead) is queued at `priority`: a cheap test before a scan.
    func hasEntries(at priority: FetchPriority) -> Bool { !levels[priority.rawValue].order.isEmpty }

    /// Submitters with entries queued at `priority` (some entries may be dead), in turn order.
    func submitters(at priority: FetchPriority) -> [SubmitterID] {
        let level = levels[priority.rawValue]
        guard !level.order.isEmpty else { return [] }
        let start = min(level.cursor, level.order.count)
        let inTurn = Array(level.order[start...] + level.order[..<start])
        // A held submitter is not waiting for a slot: it would take none given.
        let held = heldAt(priority.rawValue)
        return held.isEmpty ? inTurn : inTurn.filter { !held.contains($0) }
    }

    private mutating func insert(_ job: Job, priority: FetchPriority, submitter: SubmitterID, atFront: Bool) {
        entryCount += 1
        levels[priority.rawValue].insert(job, submitter: submitter, atFront: atFront)
    }
}
