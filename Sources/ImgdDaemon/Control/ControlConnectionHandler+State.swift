extension ControlConnectionHandler {
    /// Where the connection is in its life. It only moves forward, by the named transitions
    /// below (the handler does what each one entails):
    ///
    ///     open ── endInput ──▶ inputEnded
    ///      │                       │
    ///      └──── beginDraining ────┴──▶ draining
    ///
    ///     open, inputEnded, draining ── beginClosing ──▶ closing ── close ──▶ closed
    ///
    /// and `close` from any state (a failed write, a slow reader, the idle timeout, teardown).
    ///
    /// Whether the client's input ended matters only while the connection is open: a draining
    /// or closing connection closes once quiet whatever the client does. And nothing is read
    /// after it (the line decoder passes nothing on after a line too long, and nothing arrives
    /// after the input closed), so ``draining`` and ``closing`` need not remember it.
    ///
    /// Not states of this enum, because they change independently of it: whether a request is
    /// running (``ControlConnectionHandler/running``: one may run while open, after the input
    /// ended, or while draining), whether replies are being collected into one write
    /// (``ControlConnectionHandler/collectingOutput``: a batch opens and ends within one turn of
    /// the event loop, in any state), and whether a read is held back (the output account's:
    /// it follows the queued output, not the connection's life).
    enum State: Equatable {
        /// Reading and answering requests.
        case open
        /// The client sends nothing more (it closed its side, or sent a line over the limit):
        /// what it sent is answered, then the connection closes.
        case inputEnded
        /// The server is stopping: waiting and new requests get `shutting_down`; the connection
        /// closes once the running request has been answered and the replies have been flushed.
        case draining
        /// Closing once everything written has been flushed, or after the grace period at most.
        /// Nothing starts any more; a line still read gets `shutting_down`.
        case closing
        /// Closed: nothing more is read or written.
        case closed

        /// Lines are read (and parsed, or answered `shutting_down`).
        var readsLines: Bool { self == .open || self == .draining || self == .closing }

        /// A request read now is taken; otherwise it gets `shutting_down`. The lines read before
        /// the client's input ended are still answered.
        var takesRequests: Bool { self == .open || self == .inputEnded }

        /// The client sends nothing more: an open connection answers what it sent, then closes.
        /// Every other state closes once quiet already.
        mutating func endInput() {
            if self == .open { self = .inputEnded }
        }

        /// The server is stopping. True when the connection was open (its input ended or not) and
        /// now drains; false when it was draining, closing or closed already.
        mutating func beginDraining() -> Bool {
            guard self == .open || self == .inputEnded else { return false }
            self = .draining
            return true
        }

        /// Close once flushed. False when closing or closed already.
        mutating func beginClosing() -> Bool {
            guard self != .closing, self != .closed else { return false }
            self = .closing
            return true
        }

        /// Closed. False when it was already.
        mutating func close() -> Bool {
            guard self != .closed else { return false }
            self = .closed
            return true
        }
    }
}
