import NIOCore

/// What one control connection owes its client, counted: bytes written to the channel and not
/// yet taken by the kernel, replies held behind a request still running, events unsent; the
/// backpressure mark, and the slow-reader clock. The numbers only: the connection's handler
/// (``ControlConnectionHandler``, which owns this value on its event loop) writes, times and
/// disconnects on what they say.
///
/// The rules (the handler's notes say why): the queue is bounded by
/// ``ControlLimits/maxQueuedOutputBytes``, but one line may pass it when nothing else is queued;
/// from half of it on (the mark) the connection is backed up: nothing more is read or parsed;
/// a request starts only while what is written stays under the mark (held replies do not count
/// there: they can only go out after it). Backed up with nothing taken for
/// ``ControlLimits/slowReaderTimeout``, the client is a slow reader, unless nothing it could take
/// is written (the wait is then the daemon's).
struct ControlOutputAccount {
    /// ``ControlLimits/maxQueuedOutputBytes``.
    let limit: Int
    /// ``ControlLimits/slowReaderTimeout``.
    let slowReaderTimeout: TimeAmount

    /// Written to the channel or collected for a batch, not yet taken by the kernel.
    private(set) var writtenBytes = 0
    /// Bytes of the replies held behind the requests before them; they count as queued output.
    private(set) var heldBytes = 0
    /// Events written and not yet taken by the kernel.
    private(set) var unsentEvents = 0
    /// When the kernel last took queued output (or the output became backed up): the slow-reader
    /// timeout runs from here.
    private(set) var lastProgress: NIODeadline
    /// A `read` held back while backed up; passed on once the output is below the mark.
    private(set) var readHeldBack = false
    /// The largest queued output and event counts reported to the metrics: the shared metrics
    /// are only touched when a new high-water mark is reached.
    private var reportedBytes = 0
    private var reportedEvents = 0

    init(limits: ControlLimits, now: NIODeadline) {
        limit = limits.maxQueuedOutputBytes
        slowReaderTimeout = TimeAmount(limits.slowReaderTimeout)
        lastProgress = now
    }

    /// Everything queued: written and held.
    var queuedBytes: Int { writtenBytes + heldBytes }

    /// Whether `size` more bytes may be queued: the queued output stays within the limit, or
    /// nothing else is queued (one line may be larger than the limit on its own).
    func fits(_ size: Int) -> Bool {
        queuedBytes == 0 || queuedBytes + size <= limit
    }

    /// Half the limit or more is queued (written or held): nothing more is read or parsed until
    /// the client takes some. Half, not all: a reply of a request started just below the mark
    /// then still fits under the limit unless it is larger than half of it on its own.
    var isBackedUp: Bool {
        queuedBytes >= limit / 2
    }

    /// Whether the next request (or unparsed line) may start: what is written and not taken is
    /// below the mark. Held replies do not count: they go out after it, so waiting on them would
    /// wait forever; they are bounded on their own, since lines past the mark are not parsed.
    var mayStart: Bool {
        writtenBytes < limit / 2
    }

    /// What queuing more did, for the handler to act on. (`now` is read only when the output
    /// becomes backed up: a reply costs no clock read.)
    struct Growth: Equatable {
        /// The output just reached the mark: the slow-reader clock starts now (arm its timer).
        var becameBackedUp = false
        /// A new high-water mark of queued bytes, to report to the metrics.
        var newMaximum: Int? = nil
    }

    /// A reply held behind the requests before it: queued output from now on.
    mutating func hold(_ size: Int, now: @autoclosure () -> NIODeadline) -> Growth {
        grow(now: now) { $0.heldBytes += size }
    }

    /// A held reply leaves the queue of requests, to be written (``write(_:now:)`` counts it again).
    mutating func release(_ size: Int) {
        heldBytes -= size
    }

    /// A line written to the channel (or collected for a batch).
    mutating func write(_ size: Int, now: @autoclosure () -> NIODeadline) -> Growth {
        grow(now: now) { $0.writtenBytes += size }
    }

    private mutating func grow(now: () -> NIODeadline, _ change: (inout Self) -> Void) -> Growth {
        let wasBackedUp = isBackedUp
        change(&self)
        var growth = Growth()
        if !wasBackedUp, isBackedUp {
            lastProgress = now()
            growth.becameBackedUp = true
        }
        if queuedBytes > reportedBytes {
            reportedBytes = queuedBytes
            growth.newMaximum = reportedBytes
        }
        return growth
    }

    /// An event written: returns the new high-water mark of unsent events, if it is one.
    mutating func countEvent() -> Int? {
        unsentEvents += 1
        guard unsentEvents > reportedEvents else { return nil }
        reportedEvents = unsentEvents
        return unsentEvents
    }

    /// The kernel took `size` written bytes (or the write failed), ending `events` events.
    mutating func taken(_ size: Int, events: Int, now: NIODeadline) {
        writtenBytes -= size
        unsentEvents -= events
        lastProgress = now
    }

    /// The connection is gone: its held replies with it.
    mutating func dropHeld() {
        heldBytes = 0
    }

    /// A `read` asked for while backed up: held until ``releaseHeldRead()``.
    mutating func holdRead() {
        readHeldBack = true
    }

    /// True, once, when a read was held and the output is below the mark again: pass it on now.
    mutating func releaseHeldRead() -> Bool {
        guard readHeldBack, !isBackedUp else { return false }
        readHeldBack = false
        return true
    }

    /// When the slow-reader timer looks next.
    var stallDeadline: NIODeadline { lastProgress + slowReaderTimeout }

    /// What the slow-reader timer finds.
    enum Stall: Equatable {
        /// Not backed up (any more): nothing to watch.
        case clear
        /// Look again at ``stallDeadline``: the client took some since, or nothing it could take
        /// is written (the queue is replies held behind a request still running: the wait is the
        /// daemon's, so the clock starts again as if the client had just read).
        case notYet
        /// Backed up with nothing taken for ``slowReaderTimeout``: disconnect.
        case slowReader
    }

    /// The slow-reader verdict at `now`.
    mutating func checkStall(now: NIODeadline) -> Stall {
        guard isBackedUp else { return .clear }
        if writtenBytes == 0 {
            lastProgress = now
            return .notYet
        }
        return now < stallDeadline ? .notYet : .slowReader
    }
}
