@testable import ImgdDaemon
import NIOCore
import Testing

/// A control connection's output account alone: its limit, its backpressure mark, its
/// high-water marks and its slow-reader verdicts, at the bounds (no socket, no event loop).
@Suite("Control socket: the output account's arithmetic")
struct ControlOutputAccountTests {
    /// A 1,000-byte limit (the mark at 500) and a 10 s slow-reader timeout.
    static let limits = ControlLimits(maxQueuedOutputBytes: 1_000, slowReaderTimeout: .seconds(10))
    static let start = NIODeadline.uptimeNanoseconds(1_000_000_000)

    static func account() -> ControlOutputAccount {
        ControlOutputAccount(limits: limits, now: start)
    }

    @Test("the limit: a line fits while the queue stays within it; one line over it alone fits an empty queue only")
    func limit() {
        var output = Self.account()
        #expect(output.fits(5_000), "one line larger than the limit, nothing queued")
        _ = output.write(600, now: Self.start)
        #expect(output.fits(400), "600 + 400 is the limit itself")
        #expect(!output.fits(401), "one byte past the limit")
        _ = output.hold(300, now: Self.start)
        #expect(output.queuedBytes == 900)
        #expect(output.fits(100) && !output.fits(101), "held replies count against the limit")
        output.taken(600, events: 0, now: Self.start)
        output.release(300)
        #expect(output.queuedBytes == 0 && output.fits(5_000))
    }

    @Test("the mark at half the limit: backed up from 500 bytes queued, written or held; requests wait on written bytes only")
    func mark() {
        var output = Self.account()
        var growth = output.write(499, now: Self.start)
        #expect(!growth.becameBackedUp && !output.isBackedUp && output.mayStart)
        growth = output.write(1, now: Self.start + .seconds(1))
        #expect(growth.becameBackedUp && output.isBackedUp && !output.mayStart, "500 bytes: the mark crossed")
        #expect(output.lastProgress == Self.start + .seconds(1), "the slow-reader clock starts when the mark is crossed")
        growth = output.write(10, now: Self.start + .seconds(2))
        #expect(!growth.becameBackedUp, "crossed once, not again while over it")
        output.taken(510, events: 0, now: Self.start + .seconds(3))
        #expect(!output.isBackedUp && output.mayStart)

        // Held replies back the connection up (nothing more is read), but a request may still
        // start: they can only go out after it.
        growth = output.hold(700, now: Self.start + .seconds(4))
        #expect(growth.becameBackedUp && output.isBackedUp && output.mayStart)
        output.release(700)
        #expect(!output.isBackedUp)
    }

    @Test("a new high-water mark of queued bytes and of unsent events is reported once, not again below it")
    func highWaterMarks() {
        var output = Self.account()
        var marks = [output.write(100, now: Self.start).newMaximum, output.hold(50, now: Self.start).newMaximum]
        output.taken(100, events: 0, now: Self.start)
        marks += [output.write(100, now: Self.start).newMaximum, output.write(1, now: Self.start).newMaximum]
        #expect(marks == [100, 150, nil, 151], "150 again is not a new mark")

        var events = [output.countEvent(), output.countEvent()]
        output.taken(0, events: 2, now: Self.start)
        #expect(output.unsentEvents == 0)
        events += [output.countEvent(), output.countEvent(), output.countEvent()]
        #expect(events == [1, 2, nil, nil, 3], "two again is not a new mark")
    }

    @Test("a read asked for while backed up is held, and passed on once, when the output is below the mark again")
    func heldRead() {
        var output = Self.account()
        var released = [output.releaseHeldRead()]  // nothing held
        _ = output.write(800, now: Self.start)
        output.holdRead()
        released.append(output.releaseHeldRead())  // still backed up
        output.taken(300, events: 0, now: Self.start)
        released.append(output.releaseHeldRead())  // 500 bytes: still at the mark
        output.taken(1, events: 0, now: Self.start)
        released.append(output.releaseHeldRead())  // 499 bytes: below it
        released.append(output.releaseHeldRead())  // passed on once
        #expect(released == [false, false, false, true, false])
    }

    @Test("the slow reader: disconnected when backed up with nothing taken for the timeout, to the nanosecond; not while the client takes some, nor for replies held behind a running request")
    func slowReader() {
        var output = Self.account()
        var verdict = output.checkStall(now: Self.start + .seconds(60))
        #expect(verdict == .clear, "not backed up")

        _ = output.write(600, now: Self.start)
        #expect(output.stallDeadline == Self.start + .seconds(10))
        verdict = output.checkStall(now: Self.start + .seconds(10) - .nanoseconds(1))
        #expect(verdict == .notYet, "a nanosecond before the timeout")
        verdict = output.checkStall(now: Self.start + .seconds(10))
        #expect(verdict == .slowReader, "the timeout reached")

        // The client takes some: the clock starts again from then.
        output.taken(50, events: 0, now: Self.start + .seconds(8))
        #expect(output.stallDeadline == Self.start + .seconds(18))
        verdict = output.checkStall(now: Self.start + .seconds(17))
        #expect(verdict == .notYet)
        verdict = output.checkStall(now: Self.start + .seconds(18))
        #expect(verdict == .slowReader)

        // Everything written was taken; what is queued is replies held behind a request still
        // running: the wait is the daemon's, and the clock starts again at each look.
        output.taken(550, events: 0, now: Self.start + .seconds(19))
        _ = output.hold(700, now: Self.start + .seconds(19))
        #expect(output.isBackedUp && output.writtenBytes == 0)
        verdict = output.checkStall(now: Self.start + .seconds(60))
        #expect(verdict == .notYet)
        #expect(output.lastProgress == Self.start + .seconds(60))
        #expect(output.stallDeadline == Self.start + .seconds(70))
    }

    @Test("a connection gone drops its held replies from the count")
    func dropHeld() {
        var output = Self.account()
        _ = output.write(100, now: Self.start)
        _ = output.hold(400, now: Self.start)
        output.dropHeld()
        #expect(output.heldBytes == 0 && output.writtenBytes == 100 && output.queuedBytes == 100)
    }
}
