import ImgdCore
import Synchronization

/// High-water marks and counts of one control server, so tests can check that its buffers stay
/// bounded. Written from the connections' event loops, read from anywhere.
final class ControlMetrics: Sendable {
    struct Snapshot: Sendable, Hashable {
        /// The most input bytes the line decoder held at once.
        var largestInputBuffer = 0
        /// The most reply and event bytes a connection had queued and not yet flushed.
        var largestQueuedOutputBytes = 0
        /// The most events a connection had queued and not yet flushed.
        var largestQueuedEvents = 0
        /// Connections closed because their client did not read.
        var slowReaderDisconnects = 0
        /// Lines read (blank ones not counted).
        var linesRead = 0
        /// Lines refused as too long.
        var linesTooLong = 0
        /// Connections refused with `busy`.
        var busyRefusals = 0
        /// Writes handed to the channels (one batch of replies, or one event, each).
        var writes = 0
    }

    /// The counters of rare events and the high-water marks (only a new mark touches them):
    /// each update a few instructions under the lock.
    private let state = Locked(Snapshot())
    /// ``Snapshot/linesRead`` and ``Snapshot/writes``: counted once per request and per batch
    /// of replies by every event loop, so atomics, not the lock the loops would contend for.
    private let lines = Atomic<Int>(0)
    private let writeCount = Atomic<Int>(0)

    var snapshot: Snapshot {
        var snapshot = state.withLock { $0 }
        snapshot.linesRead = lines.load(ordering: .relaxed)
        snapshot.writes = writeCount.load(ordering: .relaxed)
        return snapshot
    }

    /// A line was read (``Snapshot/linesRead``).
    func countLineRead() {
        lines.add(1, ordering: .relaxed)
    }

    /// A write was handed to a channel (``Snapshot/writes``).
    func countWrite() {
        writeCount.add(1, ordering: .relaxed)
    }

    func recordMaximum(_ field: WritableKeyPath<Snapshot, Int>, _ value: Int) {
        state.withLock { snapshot in
            if value > snapshot[keyPath: field] { snapshot[keyPath: field] = value }
        }
    }

    func increment(_ field: WritableKeyPath<Snapshot, Int>) {
        state.withLock { $0[keyPath: field] += 1 }
    }
}
