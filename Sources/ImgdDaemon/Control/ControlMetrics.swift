import ImgdCore

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

    /// The only state: plain counters, each update a few instructions under the lock.
    private let state = Locked(Snapshot())

    var snapshot: Snapshot { state.withLock { $0 } }

    func recordMaximum(_ field: WritableKeyPath<Snapshot, Int>, _ value: Int) {
        state.withLock { snapshot in
            if value > snapshot[keyPath: field] { snapshot[keyPath: field] = value }
        }
    }

    func increment(_ field: WritableKeyPath<Snapshot, Int>) {
        state.withLock { $0[keyPath: field] += 1 }
    }
}
