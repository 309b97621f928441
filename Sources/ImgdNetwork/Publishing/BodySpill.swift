import ImgdCore
import ImgdStore
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The part of a body too large for the transfer buffer that has already been handed off: its
/// temp file, its SHA-256 so far and, for a PNG of declared length, its chunk walk so far
/// (``PNGArrivalWalk``), all advanced on one of the publisher's spill lanes.
///
/// Why not write on the transfer loop: on a large image the loop was the critical path —
/// receiving from the socket, then copying every 64 KiB into the page cache — while the
/// publisher read the whole file back to hash it. Now the loop only receives; each full buffer
/// is moved (not copied) to a lane, which hashes it while it is still in the CPU's cache and
/// appends it to the file, and nothing is read back: a PNG's chunks (the one format whose
/// validation must see every byte) are walked here too, so its validation reads only the head
/// of the file. Two lanes keep two cores busy with several large bodies arriving at once; a body
/// goes to the one with fewer in progress (``SpillLanes``).
///
/// Chunks of one body run in order on its lane. The loop learns of a failed write at its next
/// chunk (``failure``) and stops the transfer then; the publisher learns of it at ``finish(tail:)``.
/// Chunks waiting on all lanes together are capped by a ``SpillGate``: when the disk cannot keep
/// up, the loop waits for it instead of holding the bodies in memory.
///
/// An actor on its lane (a ``QueueExecutor`` shared by the bodies ``SpillLanes`` gave it): the
/// file and the hasher are its own. The loop, which is not async, hands it chunks by enqueueing
/// on the lane; the failure, which the loop reads, is behind its own lock, and `isDiscarded` is
/// atomic.
actor BodySpill {
    /// The lane the spill's work runs on, in order.
    nonisolated let lane: QueueExecutor
    /// The lanes, and this body's among them: given back once, when the body is done.
    private nonisolated let lanes: SpillLanes
    private nonisolated let laneIndex: Int
    private nonisolated let isLaneGivenBack = Atomic<Bool>(false)
    private nonisolated let cache: CacheDirectory
    private nonisolated let key: CacheKey
    private nonisolated let gate: SpillGate
    /// The body's size as its response declared it: what a PNG walk is made for.
    private nonisolated let declaredLength: Int?
    private var file: TempFile?
    private var hasher = SHA256Hasher()
    /// The PNG chunk walk, made with the first chunk when the body is a PNG of declared length.
    private var walk: PNGArrivalWalk?
    private nonisolated let failureBox = Locked<StoreError?>(nil)
    /// Set by ``discard()``: chunks still queued are dropped instead of written.
    private nonisolated let isDiscarded = Atomic<Bool>(false)

    nonisolated var unownedExecutor: UnownedSerialExecutor { lane.asUnownedSerialExecutor() }

    /// A spill on the lane of `lanes` with the fewest bodies in progress.
    init(lanes: SpillLanes, cache: CacheDirectory, key: CacheKey, declaredLength: Int?, gate: SpillGate) {
        self.lanes = lanes
        laneIndex = lanes.take()
        lane = lanes.executors[laneIndex]
        self.cache = cache
        self.key = key
        self.declaredLength = declaredLength
        self.gate = gate
    }

    /// The first write that failed (the rest of the body is then dropped), if any.
    nonisolated var failure: StoreError? { failureBox.withLock { $0 } }

    /// On the loop: queues `chunk` to be hashed and appended to the file (made with the first
    /// chunk). Waits while the lanes hold as many chunks as the gate allows.
    nonisolated func append(_ chunk: [UInt8]) {
        gate.enter()
        lane.enqueue { [self] in
            defer { gate.leave() }
            guard failure == nil, !isDiscarded.load(ordering: .relaxed) else { return }
            assumeIsolated { spill in
                do throws(StoreError) {
                    try spill.write(chunk)
                } catch {
                    spill.failureBox.withLock { $0 = error }
                }
            }
        }
    }

    /// On the lane, after every chunk: appends `tail` (the bytes still in the transfer's buffer) and
    /// returns the complete temp file with the body's digest and its PNG walk, if one was made.
    /// Throws the first write failure; the file is then removed.
    func finish(tail: [UInt8]) throws(StoreError) -> (file: TempFile, digest: SHA256Digest, walk: PNGArrivalWalk?) {
        defer { giveBackLane() }
        do throws(StoreError) {
            if let failure { throw failure }
            try write(tail)
        } catch {
            file?.discard()
            throw error
        }
        guard let file else { throw .writeFailed(path: cache.tempFolder, errno: EIO) }  // a spill always had a chunk
        return (file, hasher.finish(), walk)
    }

    /// Removes the temp file (a failed or cancelled transfer) and returns once it is gone: a
    /// caller may rely on the space being free (on a full filesystem, the index cannot record
    /// the eviction that makes room until it is). This body's chunks still queued are dropped
    /// unwritten; the wait is for what the lane does before them for other bodies — at most the
    /// gate's worth of chunks, and the header-and-end check and rename of bodies finishing.
    nonisolated func discard() {
        isDiscarded.store(true, ordering: .relaxed)
        lane.queue.sync { assumeIsolated { $0.file?.discard() } }
        giveBackLane()
    }

    deinit { giveBackLane() }  // a spill dropped without either (the engine stopped)

    /// Counts the body out of its lane, once (a body both finished and discarded counts once).
    private nonisolated func giveBackLane() {
        if !isLaneGivenBack.exchange(true, ordering: .relaxed) { lanes.giveBack(laneIndex) }
    }

    private func write(_ bytes: [UInt8]) throws(StoreError) {
        let file: TempFile
        if let existing = self.file {
            file = existing
        } else {
            file = try cache.makeTempFile(for: key)
            if let declaredLength { walk = bytes.withUnsafeBytes { PNGArrivalWalk(head: $0, bodyCount: declaredLength) } }
        }
        self.file = file
        try file.write(bytes)
        // Hashed and walked once written: the digest and the walk only ever vouch for bytes the
        // file holds.
        bytes.withUnsafeBytes { chunk in
            hasher.update(chunk)
            walk?.feed(chunk)
        }
    }
}
