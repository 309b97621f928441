import Dispatch
import ImgdCore
import ImgdStore
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Validates arrived bodies and publishes them into the cache, on its own serial queue, so the
/// transfer loop goes straight back to moving bytes while the disk work of the previous image
/// (validate, hash, write, index row) proceeds on the other core.
///
/// Outcomes are reported in batches, each after one index transaction: when ``maxBatch`` images
/// are pending; when the queue runs dry and the engine said no other transfer was running (a
/// lone fetch is answered at once); else ``commitDelay`` after the first pending one. A caller
/// told "cached" always finds the row; the engine is woken once per batch rather than once per
/// image.
///
/// Why wait while transfers run: keys are random, so each row lands on its own index page, and
/// a transaction writes every page it touched to the WAL once, plus the tree's upper pages.
/// Committing whenever the queue ran dry made batches of ~28 rows while warming (1.8 pages of
/// WAL per row). Waiting up to 25 ms for at most 256 rows wrote a 30 MB WAL for 20,000 small
/// images (a 5 MB index); 50 ms and 1,024 rows write about a third of that, and took warming
/// from 1.79 to 1.63 s of CPU (going to 100 ms and 2,048 gained nothing more; bench/README.md).
///
/// ``backlog`` counts bodies handed over and not yet written out (they hold memory). The
/// engine stops starting transfers while it is long and asks to be woken once it has halved.
///
/// An actor on its own serial queue (``QueueExecutor``): the batch (`pending…`,
/// `isCommitScheduled`) is its own. The transfer loop, which is not async, hands it bodies by
/// enqueueing on that queue (or on a spill lane) and the work then runs isolated there; the
/// counters the loop reads are atomic.
actor BodyPublisher {
    /// Rows written per transaction at most.
    static let maxBatch = 1024
    /// How long a published image may wait for its index row to be committed while other
    /// transfers are still running.
    static let commitDelay: DispatchTimeInterval = .milliseconds(50)

    private nonisolated let executor = QueueExecutor(label: "imgd-publisher")
    /// Where large bodies are written and hashed as they arrive (``BodySpill``), and then
    /// checked and renamed into place; a body goes to the lane with the fewest in progress. Two:
    /// with the loop and this queue, enough to keep two cores busy on large images
    /// (bench/README.md).
    nonisolated let spillLanes = SpillLanes(count: 2)
    private nonisolated let spillGate = SpillGate()
    private nonisolated let disk: DiskCache
    private nonisolated var cache: CacheDirectory { disk.directory }
    private nonisolated let validator: ImageValidator
    private nonisolated let deliver: @Sendable ([PublishOutcome]) -> Void
    private nonisolated let waiting = Atomic<Int>(0)
    /// Bodies handed over whose outcome is not yet delivered (their space may be held).
    private nonisolated let uncommitted = Atomic<Int>(0)
    /// Whether the engine had other transfers running or queued at its latest hand-over: a
    /// spilled body reaches the batch later than a small one handed over after it, so the flag
    /// it came with may be stale by then.
    private nonisolated let latestMoreExpected = Atomic<Bool>(false)
    /// Backlog at which the waiting engine is woken; 0 when it is not waiting.
    private nonisolated let wakeAt = Atomic<Int>(0)
    private nonisolated let wake: @Sendable () -> Void
    private var pendingRows: [IndexEntry] = []
    private var pendingOutcomes: [PublishOutcome] = []
    private var pendingReservations: [SpaceReservation] = []
    private var isCommitScheduled = false

    nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

    init(
        cache: DiskCache, validator: ImageValidator, deliver: @escaping @Sendable ([PublishOutcome]) -> Void,
        wake: @escaping @Sendable () -> Void
    ) {
        self.disk = cache
        self.validator = validator
        self.deliver = deliver
        self.wake = wake
    }

    /// Bodies handed over and not yet written out.
    nonisolated var backlog: Int { waiting.load(ordering: .relaxed) }

    /// The engine holds transfers back while ``backlog`` is long: wake it when the backlog has
    /// come down to `level`.
    nonisolated func wakeWhenBacklog(reaches level: Int) { wakeAt.store(max(1, level), ordering: .relaxed) }

    /// A spill for a body of `key` that outgrew the transfer buffer, on the lane with the
    /// fewest bodies in progress; `declaredLength` is the body's size as its response declared
    /// it, if it did.
    nonisolated func makeSpill(for key: CacheKey, declaredLength: Int?) -> BodySpill {
        BodySpill(lanes: spillLanes, cache: cache, key: key, declaredLength: declaredLength, gate: spillGate)
    }

    /// Returns once every lane has done what was queued on it before the call.
    nonisolated func drainSpills() {
        for lane in spillLanes.executors { lane.queue.sync {} }
    }

    /// Validates and publishes `body`; its outcome is delivered with the next batch.
    /// `moreExpected`: other transfers were running when it arrived, so its row may wait (up to
    /// ``commitDelay``) to share a transaction with theirs.
    ///
    /// A spilled body is finished on its lane, after its chunks, and its result then joins the
    /// batch on the publisher's queue.
    nonisolated func publish(_ body: ArrivedBody, moreExpected: Bool) {
        // Before its final name is written; ended in `commit()`, whatever the outcome.
        disk.beginPublishing(body.key)
        waiting.add(1, ordering: .relaxed)
        uncommitted.add(1, ordering: .relaxed)
        latestMoreExpected.store(moreExpected, ordering: .relaxed)
        if let spill = body.spill {
            spill.lane.enqueue { [self] in
                let result = spill.assumeIsolated { publishSpilled(body, spill: $0) }
                executor.enqueue { [self] in assumeIsolated { $0.batch(body, result) } }
            }
        } else {
            executor.enqueue { [self] in assumeIsolated { $0.batch(body, publishNow(body)) } }
        }
    }

    /// On the queue: counts `body` as written, adds its outcome (and row) to the batch, and
    /// commits the batch when it is due.
    private func batch(_ body: ArrivedBody, _ result: Result<CachedImage, DownloadError>) {
        let left = waiting.subtract(1, ordering: .relaxed).newValue
        let level = wakeAt.load(ordering: .relaxed)
        if level > 0, left <= level, wakeAt.compareExchange(expected: level, desired: 0, ordering: .relaxed).exchanged {
            wake()
        }
        var result = result
        if case .success(var image) = result {
            // The row goes back with the outcome: the caller need not read it from the index.
            let row = Self.indexEntry(for: image, owner: body.owner)
            image.entry = row
            result = .success(image)
            pendingRows.append(row)
            pendingReservations.append(body.reservation)
        } else {
            body.reservation.release()
        }
        pendingOutcomes.append(PublishOutcome(key: body.key, jobSerial: body.jobSerial, result: result))
        if pendingOutcomes.count >= Self.maxBatch || (left == 0 && !latestMoreExpected.load(ordering: .relaxed)) {
            commit()
        } else if !isCommitScheduled {
            isCommitScheduled = true
            executor.queue.asyncAfter(deadline: .now() + Self.commitDelay) { [weak self] in self?.assumeIsolated { $0.commit() } }
        }
    }

    /// Returns once every body handed over before the call is published (or failed) and its row
    /// committed: the lanes first (a spilled body's result is queued here before its lane goes
    /// on), then the batch. For a transfer whose space is held by bodies still waiting for their
    /// rows (they become evictable once recorded): the room maker awaits it on the cache's
    /// housekeeping executor, which serves other work meanwhile.
    ///
    /// Each lane is awaited, not blocked on: a marker queued behind the lane's work resumes this
    /// task, and the resumption is queued here after the results that work queued here, so the
    /// commit below sees them.
    func settle() async {
        guard uncommitted.load(ordering: .relaxed) > 0 else { return }
        for lane in spillLanes.executors {
            await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in lane.queue.async { done.resume() } }
        }
        commit()
    }

    /// ``settle()`` for the engine's own thread when it stops, which has nothing else to serve
    /// and is not async: it blocks until the lanes and the queue have done what was handed over.
    /// It cannot deadlock: nothing on the lanes or this queue waits for the engine's thread
    /// (outcomes and wake-ups go to its inbox, which never blocks).
    nonisolated func settleBlocking() {
        guard uncommitted.load(ordering: .relaxed) > 0 else { return }
        drainSpills()
        executor.queue.sync { assumeIsolated { $0.commit() } }
    }

    /// Writes the pending rows in one transaction and delivers the pending outcomes. If the
    /// index refuses (a full disk, say), those files go too and their jobs fail with `disk`.
    private func commit() {
        isCommitScheduled = false
        guard !pendingOutcomes.isEmpty else { return }
        var outcomes = pendingOutcomes
        let keys = outcomes.map(\.key)
        do {
            // Recorded files now count as stored: the space held for them goes back at once, and
            // their publishes end with the commit.
            try disk.record(pendingRows, releasing: pendingReservations.reduce(0) { $0 + $1.bytes }, endingPublishing: keys)
            for reservation in pendingReservations { reservation.settled() }
            // Quotas per user: owners charged by this batch are checked on the housekeeping queue.
            disk.charged(pendingRows.lazy.compactMap(\.owner))
        } catch {
            // Unrecorded: their publishes end here, so that the drops below remove their files.
            disk.endPublishing(keys)
            outcomes = outcomes.map { outcome in
                guard case .success(let image) = outcome.result else { return outcome }
                disk.drop(image.key)
                return PublishOutcome(
                    key: outcome.key, jobSerial: outcome.jobSerial,
                    result: .failure(.disk("cannot record \(image.url) in the cache index: \(error)", outOfSpace: error.isDiskFull)))
            }
        }
        for reservation in pendingReservations { reservation.release() }  // a no-op once settled
        pendingRows.removeAll(keepingCapacity: true)
        pendingOutcomes.removeAll(keepingCapacity: true)
        pendingReservations.removeAll(keepingCapacity: true)
        uncommitted.subtract(outcomes.count, ordering: .relaxed)
        deliver(outcomes)
    }

    private static func indexEntry(for image: CachedImage, owner: UInt32?) -> IndexEntry {
        let record = image.download!
        let now = WallClock.nowMilliseconds()
        return IndexEntry(
            key: image.key, url: image.url.normalized, bytes: image.bytes, sha256: record.sha256,
            format: record.image.format, width: record.image.width, height: record.image.height,
            etag: record.etag, lastModified: record.lastModified, contentType: record.contentType,
            fetchedAt: now, lastAccess: now, freshness: EntryFreshness(record.freshness, receivedAt: now), owner: owner)
    }

    /// Records a `304` for `key`'s entry: its freshness renewed from `response` (and the
    /// validators it sent, if any), its file untouched. The outcome (the entry as it is on disk,
    /// or a failure when it is gone) is delivered at once, marked ``PublishOutcome/revalidated``.
    nonisolated func revalidated(
        url: ImageURL, key: CacheKey, jobSerial: UInt64, response: ResponseFreshness, etag: String?, lastModified: String?
    ) {
        executor.enqueue { [self] in
            assumeIsolated { _ in
                let now = WallClock.nowMilliseconds()
                let result: Result<CachedImage, DownloadError>
                if let found = disk.lookup(key) {
                    let renewed = found.entry.freshness.revalidated(by: response, at: now)
                    do throws(SQLiteError) {
                        try disk.index.updateFreshness(key, renewed, etag: etag, lastModified: lastModified)
                        result = .success(CachedImage(
                            url: url, key: key, path: found.path, bytes: found.entry.bytes, source: .disk, download: nil))
                    } catch {
                        result = .failure(.disk("cannot record the revalidation of \(url) in the cache index: \(error)", outOfSpace: error.isDiskFull))
                    }
                } else {
                    result = .failure(.disk("\(url) left the cache while it was revalidated"))
                }
                deliver([PublishOutcome(key: key, jobSerial: jobSerial, result: result, revalidated: true)])
            }
        }
    }

    /// Checks a body that stayed in memory and gives it its final name; on any failure nothing
    /// is left behind. The content digest is taken here, not as bytes arrive, so the transfer
    /// thread spends its time on transfers; this queue runs on the other core.
    nonisolated func publishNow(_ body: ArrivedBody) -> Result<CachedImage, DownloadError> {
        do throws(DownloadError) {
            // Checked before it touches the disk, then written straight to its final name (a temp
            // file and a rename only when an older file has that name: see CacheDirectory.publishNew).
            let digest = body.buffer.withUnsafeBytes { SHA256Digest(of: $0) }
            try Self.check(digest, of: body)
            let info = try validate(MemoryByteSource(body.buffer))
            try checkQuota(of: body)
            let file: TempFile
            do {
                if let path = try cache.publishNew(body.buffer, as: body.key) {
                    return .success(image(body, at: path, digest: digest, info: info))
                }
                file = try cache.makeTempFile(for: body.key)
                try file.write(body.buffer)
            } catch {
                throw .disk(error.description, outOfSpace: error.isOutOfSpace)
            }
            return .success(image(body, at: try rename(file, as: body.key), digest: digest, info: info))
        } catch {
            return .failure(error)
        }
    }

    /// On the body's lane, after its chunks: writes the tail, checks the whole file and renames
    /// it into place; on any failure the temp file is removed.
    func publishSpilled(_ body: ArrivedBody, spill: isolated BodySpill) -> Result<CachedImage, DownloadError> {
        let spilled: (file: TempFile, digest: SHA256Digest, walk: PNGArrivalWalk?)
        do {
            spilled = try spill.finish(tail: body.buffer)
        } catch {
            return .failure(.disk(error.description, outOfSpace: error.isOutOfSpace))
        }
        // The file must hold every byte written to it. One that holds fewer was cut here, not by
        // the origin: a disk error, not `truncated` (which would be retried and blamed on the URL).
        var status = stat()
        guard fstat(spilled.file.fileDescriptor, &status) == 0, Int(status.st_size) == body.bytes else {
            spilled.file.discard()
            return .failure(.disk("the spilled body's file holds \(status.st_size) of the \(body.bytes) bytes written to it", outOfSpace: false))
        }
        do throws(DownloadError) {
            try Self.check(spilled.digest, of: body)
            let info = try validate(FileByteSource(fileDescriptor: spilled.file.fileDescriptor, count: body.bytes), walked: spilled.walk)
            try checkQuota(of: body)
            return .success(image(body, at: try rename(spilled.file, as: body.key), digest: spilled.digest, info: info))
        } catch {
            spilled.file.discard()
            return .failure(error)
        }
    }

    /// Gives a complete temp file its final name, replacing any older file atomically; the temp
    /// file is removed if that fails.
    private nonisolated func rename(_ file: TempFile, as key: CacheKey) throws(DownloadError) -> String {
        defer { file.discard() }  // a no-op once published
        do {
            return try cache.publish(file, as: key)
        } catch {
            throw .disk(error.description, outOfSpace: error.isOutOfSpace)
        }
    }

    private nonisolated func image(_ body: ArrivedBody, at path: String, digest: SHA256Digest, info: ImageInfo) -> CachedImage {
        let record = DownloadRecord(
            finalURL: body.finalURL, status: body.status, etag: body.etag, lastModified: body.lastModified,
            contentType: body.contentType, bytes: body.bytes, sha256: digest, image: info,
            duration: body.duration, attempts: body.attempts, freshness: body.freshness,
            servedBy: body.servedBy)
        return CachedImage(url: body.url, key: body.key, path: path, bytes: body.bytes, source: .network, download: record)
    }

    /// The body's digest against the one its request named, if any: a body that differs is
    /// not the image asked for, whatever it looks like, and never gets the entry's name.
    private static func check(_ digest: SHA256Digest, of body: ArrivedBody) throws(DownloadError) {
        guard let expected = body.expectedSHA256, expected != digest else { return }
        throw .checksumMismatch(expected: expected, received: digest)
    }

    /// Quotas per user: a body larger than what its owner may hold is refused before it gets
    /// its name (``DiskCache/quotaRefusal(owner:bytes:key:)``), so nothing cached is lost to it.
    private nonisolated func checkQuota(of body: ArrivedBody) throws(DownloadError) {
        if let refusal = disk.quotaRefusal(owner: body.owner, bytes: body.bytes, key: body.key) { throw .quotaExceeded(refusal) }
    }

    private nonisolated func validate(_ source: some ImageByteSource, walked: PNGArrivalWalk? = nil) throws(DownloadError) -> ImageInfo {
        do {
            return try validator.validate(source, walked: walked)
        } catch let error as ImageValidationError {
            switch error {
            case .notImage(let reason): throw .notImage(reason)
            case .truncated(let reason): throw .truncated(reason)
            case .corrupt(let reason): throw .corrupt(reason)
            case .tooManyPixels(let width, let height, let limit):
                throw .tooLarge("\(width)×\(height) pixels is over the \(limit)-pixel limit")
            }
        } catch {
            throw .disk("cannot read back the body: \(error)")
        }
    }
}
