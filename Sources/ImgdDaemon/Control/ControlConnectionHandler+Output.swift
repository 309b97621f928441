import NIOCore

/// Writing: replies (collected into one write per batch) and events, handed to the channel in
/// slices whose completions count the output down; the slow-reader timer. The numbers are
/// ``ControlOutputAccount``'s.
extension ControlConnectionHandler {
    /// Writes one line (a reply is collected while a batch is open). A reply is always queued:
    /// its request started below the backpressure mark, so the queue ends at most one reply past
    /// the limit. An event that would pass the limit disconnects the client (the subscription
    /// drops events long before, see ``deliverEvent(_:sequence:)``).
    func write(_ line: ByteBuffer, isEvent: Bool) {
        guard state != .closed, context != nil else { return }
        let size = line.readableBytes
        guard !isEvent || output.fits(size) else {
            disconnectSlowReader()
            return
        }
        grew(output.write(size, now: .now()))
        guard isEvent else {
            if collectingOutput {
                if outbox == nil { outbox = line } else { outbox!.writeImmutableBuffer(line) }
            } else {
                send(line, events: 0)
            }
            return
        }
        if let maximum = output.countEvent() {
            settings.metrics.recordMaximum(\.largestQueuedEvents, maximum)
        }
        // An event follows the replies written before it.
        sendOutbox()
        send(line, events: 1)
    }

    /// Acts on more queued output: the slow-reader clock starts when it reached the mark, and a
    /// new high-water mark goes to the metrics.
    func grew(_ growth: ControlOutputAccount.Growth) {
        if growth.becameBackedUp { armStallTimer() }
        if let maximum = growth.newMaximum {
            settings.metrics.recordMaximum(\.largestQueuedOutputBytes, maximum)
        }
    }

    /// Closes the batch of collected replies and sends them.
    func endOutputBatch() {
        collectingOutput = false
        sendOutbox()
    }

    /// Sends the collected replies (already counted in `output`) as one write.
    func sendOutbox() {
        guard let batch = outbox else { return }
        outbox = nil
        send(batch, events: 0)
    }

    /// Hands `bytes` (already counted in `output`) to the channel and flushes. A
    /// large batch goes in slices of ``sliceBytes`` (views of the same memory), each written
    /// with its own promise: the queued count then falls as the client reads, and a client
    /// reading a 5 MiB reply slowly but steadily is seen to make progress, not to stall.
    private func send(_ bytes: ByteBuffer, events: Int) {
        guard let context else { return }
        settings.metrics.countWrite()
        var rest = bytes
        while rest.readableBytes > 0 {
            let slice = rest.readSlice(length: min(Self.sliceBytes, rest.readableBytes))!
            let size = slice.readableBytes
            let isLast = rest.readableBytes == 0
            let promise = context.eventLoop.makePromise(of: Void.self)
            promise.futureResult.assumeIsolated().whenComplete { [self] _ in
                output.taken(size, events: isLast ? events : 0, now: .now())
                written()
            }
            context.write(wrapOutboundOut(slice), promise: promise)
        }
        context.flush()
    }

    /// The most bytes handed to the channel in one write: NIO gathers consecutive ones into one
    /// `writev`, so slicing costs no system calls.
    static let sliceBytes = 256 * 1024

    /// A line reached the kernel (or failed to).
    func written() {
        switch state {
        case .closed:
            return
        case .closing:
            if output.writtenBytes == 0 { close() }
            return
        case .open, .inputEnded, .draining:
            break
        }
        sendDropNoticeIfReady()
        // Below the mark again: read on.
        if let context, output.releaseHeldRead() {
            context.read()
        }
        // Answer what waited: held replies go out even while backed up (see ``drain()``).
        if !isRunning, !pending.isEmpty {
            collectingOutput = true
            drain()
            endOutputBatch()
        }
    }

    /// Makes sure a timer looks at the connection once it has been backed up with no output
    /// taken for the slow-reader timeout. A timer already scheduled is kept.
    private func armStallTimer() {
        guard state != .closed, stallTimer == nil, let context else { return }
        stallTimer = context.eventLoop.assumeIsolated().scheduleTask(deadline: output.stallDeadline) { [self] in
            stallTimer = nil
            guard state != .closed else { return }
            switch output.checkStall(now: .now()) {
            case .clear: return
            case .notYet: armStallTimer()
            case .slowReader: disconnectSlowReader()
            }
        }
    }

    func disconnectSlowReader() {
        guard state != .closed else { return }
        settings.metrics.increment(\.slowReaderDisconnects)
        logger.info(
            "control: disconnecting: the client does not read its replies (\(output.queuedBytes) bytes queued, limit \(limits.maxQueuedOutputBytes))")
        close()
    }
}
