import ImgdProtocol
import NIOCore

/// `subscribe` and the delivery of events to a subscribed connection.
///
/// Events written and not yet taken by the kernel are the connection's event queue. Once it
/// holds ``ControlLimits/maxQueuedEvents``, further events are dropped and counted; when the
/// channel is writable again and the queue has drained to half, one
/// `{"event":"events_dropped","seq":N,"data":{"count":K}}` line goes out (N: the last dropped
/// event's number) before any later event, so sequence numbers still only go up.
extension ControlConnectionHandler {
    /// Handles `subscribe` {events?: [name]}: every known event by default. A second
    /// `subscribe` replaces the first's names.
    func subscribe(_ request: ControlRequest) -> Result<JSONValue, ControlError> {
        guard let context else { return .failure(.shuttingDown) }
        let names: [String]
        do throws(ControlError) {
            names = try subscriptionNames(request)
        } catch {
            return .failure(error)
        }
        if let subscription {
            settings.events.update(subscription, names: Set(names))
        } else {
            let loop = context.eventLoop
            let connection = NIOLoopBound(self, eventLoop: loop)
            subscription = settings.events.subscribe(names: Set(names)) { line, sequence in
                loop.execute { connection.value.deliverEvent(line, sequence: sequence) }
            }
        }
        idleTimer?.cancel()
        idleTimer = nil
        return .success(["subscribed": JSONValue(names)])
    }

    private func subscriptionNames(_ request: ControlRequest) throws(ControlError) -> [String] {
        guard let requested = try request.optionalStrings("events") else { return settings.events.eventNames }
        let unknown = requested.filter { !settings.events.isKnown($0) }
        guard unknown.isEmpty else {
            let known = settings.events.eventNames.joined(separator: ", ")
            throw .invalidArgument(field: "events", reason: "unknown event \"\(unknown[0])\" (known: \(known))")
        }
        var seen = Set<String>()
        return requested.filter { seen.insert($0).inserted }
    }

    func endSubscription() {
        guard let subscription else { return }
        settings.events.unsubscribe(subscription)
        self.subscription = nil
    }

    /// An event from the hub, on the loop.
    func deliverEvent(_ line: ByteBuffer, sequence: Int) {
        // Subscribed is not draining: draining ends the subscription.
        guard state != .closed, subscription != nil else { return }
        if droppedEvents > 0 { sendDropNoticeIfReady() }
        // Dropped, not queued, past the count or the bytes: a subscriber that stops reading
        // loses events and gets one events_dropped line, but is not disconnected for them.
        // While a descriptor is passed nothing else may be written (its reply's `\n` carries
        // it): an event then is dropped and counted like one the client was too slow for.
        guard passing == nil, droppedEvents == 0, output.unsentEvents < limits.maxQueuedEvents, output.fits(line.readableBytes) else {
            droppedEvents += 1
            lastDroppedSequence = sequence
            settings.events.recordDropped()
            return
        }
        write(line, isEvent: true)
    }

    /// Sends the `events_dropped` line once the client reads again.
    func sendDropNoticeIfReady() {
        guard droppedEvents > 0, passing == nil, state != .closed, subscription != nil, let context, context.channel.isWritable,
            output.unsentEvents <= limits.maxQueuedEvents / 2, !output.isBackedUp
        else { return }
        let notice = ControlLine.eventsDropped(count: droppedEvents, lastSequence: lastDroppedSequence)
        droppedEvents = 0
        write(notice, isEvent: true)
    }
}
