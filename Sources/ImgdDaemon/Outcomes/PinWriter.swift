import Dispatch
import ImgdCore
import ImgdNetwork
import ImgdStore
import Logging

/// `add`'s pins, written to the cache index in batches on a queue of their own (`imgd.pins`),
/// as the spool batches its lists' pins, instead of one index write each on the engine's
/// thread, where the downloader answers and every transfer waits for it.
///
/// A batch is what arrived while the previous one was written: the first pin of a batch
/// schedules a flush at once, so none waits longer than one write. A pinned URL's outcome is
/// recorded (its `fetched` event published) after its pin is written, as it was before: a
/// client that sees the event finds the entry pinned.
final class PinWriter: Sendable {
    private struct Pin {
        let key: CacheKey
        let until: Int
        let url: ImageURL
        let result: Result<CachedImage, DownloadError>
    }

    private struct Pending {
        var pins: [Pin] = []
        var isFlushScheduled = false
    }

    private let pending = Locked(Pending())
    private let queue = DispatchQueue(label: "imgd.pins")
    private let index: CacheIndex
    private let outcomes: OutcomeRecorder
    private let logger: Logger

    init(index: CacheIndex, outcomes: OutcomeRecorder, logger: Logger) {
        self.index = index
        self.outcomes = outcomes
        self.logger = logger
    }

    /// Pins `key` for `milliseconds` from now, then records `result` for `url` (any thread:
    /// the engine's, where the downloader answers).
    func pin(_ key: CacheKey, for milliseconds: Int, thenRecord url: ImageURL, _ result: Result<CachedImage, DownloadError>) {
        let pin = Pin(key: key, until: WallClock.nowMilliseconds() + milliseconds, url: url, result: result)
        let schedule = pending.withLock { pending in
            pending.pins.append(pin)
            defer { pending.isFlushScheduled = true }
            return !pending.isFlushScheduled
        }
        if schedule { queue.async { self.flush() } }
    }

    /// Returns once every pin handed over before the call is written (the stop calls it before
    /// the index closes).
    func drain() {
        queue.sync {}
    }

    /// ``drain()`` for a task: suspends instead of blocking its thread.
    func flushed() async {
        await withCheckedContinuation { continuation in queue.async { continuation.resume() } }
    }

    /// On the queue: writes what is pending in one transaction, then records the outcomes.
    private func flush() {
        let batch = pending.withLock { pending in
            pending.isFlushScheduled = false
            defer { pending.pins.removeAll() }
            return pending.pins
        }
        guard !batch.isEmpty else { return }
        do {
            try index.pin(batch.map { ($0.key, $0.until) })
        } catch {
            // As before a failed pin is no failed download: the entries stay, unpinned.
            logger.warning("cannot pin \(batch.count) entries in the cache index (they are evicted like any other), ignoring: \(error)")
        }
        for pin in batch { outcomes.record(pin.url, pin.result) }
    }
}
