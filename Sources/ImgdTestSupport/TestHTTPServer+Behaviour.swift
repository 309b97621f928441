extension TestHTTPServer {
    /// How a response is delivered, from the modifier parameters any route accepts.
    ///
    /// The steps run in this order: wait on `gate`, wait `delay_ms`, send the head (or hang up
    /// instead, for `hangup`), send the body (all at once, or in pieces at `slow_bps`), then end,
    /// stall or close.
    struct Behaviour: Sendable, Equatable {
        /// How the body's end is marked on the wire.
        enum Framing: Sendable, Equatable {
            /// `Content-Length` of the actual size plus `delta` (`cl=+K`/`cl=-K`); a nonzero delta
            /// is a lie, so the connection closes after the body.
            case contentLength(delta: Int)
            /// No length and no chunking (`no_cl=1`): `Connection: close`, the close ends the body.
            case closeDelimited
            /// `Transfer-Encoding: chunked` (`chunked=1`).
            case chunked
        }

        /// Where delivery stops short of the whole body.
        enum Cut: Sendable, Equatable {
            /// `stall_after=N`: send N body bytes, then nothing, leaving the connection open.
            case stall(after: Int)
            /// `close_after=N`: send N body bytes, then close the connection.
            case close(after: Int)
        }

        /// How a connection is dropped instead of answered.
        enum HangUp: String, Sendable, Equatable {
            /// `hangup=close`: closed in order (FIN) before any byte of a response.
            case close
            /// `hangup=reset`: reset (RST, by a zero linger) before any byte of a response.
            case reset
        }

        /// `hangup=close|reset`: no response at all; the connection ends where the head would go.
        var hangUp: HangUp?
        /// `gate=NAME`: the head waits until `openGate(NAME)`.
        var gate: String?
        /// `delay_ms=N`: milliseconds to wait before the head (at most a minute).
        var delayMilliseconds: Int = 0
        /// `slow_bps=N`: send the body in small timed pieces at about N bytes per second.
        var slowBytesPerSecond: Int?
        var cut: Cut?
        var framing: Framing = .contentLength(delta: 0)

        /// The longest `delay_ms` accepted: a test that needs longer is waiting on the wrong thing.
        static let maximumDelayMilliseconds = 60_000
        /// The largest `cl` lie accepted, in either direction.
        static let maximumLengthDelta = 1 << 30

        init() {}

        init(_ target: Target) throws(Target.Invalid) {
            gate = target.query["gate"]
            if let text = target.query["hangup"] {
                guard let hangUp = HangUp(rawValue: text) else { throw Target.Invalid(name: "hangup", value: text) }
                self.hangUp = hangUp
            }
            delayMilliseconds =
                try target.integer("delay_ms", default: 0, in: 0...Self.maximumDelayMilliseconds) ?? 0
            slowBytesPerSecond = try target.integer("slow_bps", in: 1...Int(Int32.max))
            let stallAfter = try target.integer("stall_after", in: 0...Int.max)
            let closeAfter = try target.integer("close_after", in: 0...Int.max)
            switch (stallAfter, closeAfter) {
            case (let count?, nil): cut = .stall(after: count)
            case (nil, let count?): cut = .close(after: count)
            case (nil, nil): cut = nil
            case (_?, _?): throw Target.Invalid(name: "close_after", value: "with stall_after")
            }
            // Framing options contradict each other; refusing the mix keeps every test's intent clear.
            let delta = try target.integer("cl", in: -Self.maximumLengthDelta...Self.maximumLengthDelta)
            switch (delta, target.flag("no_cl"), target.flag("chunked")) {
            case (nil, false, false): framing = .contentLength(delta: 0)
            case (let delta?, false, false): framing = .contentLength(delta: delta)
            case (nil, true, false): framing = .closeDelimited
            case (nil, false, true): framing = .chunked
            default: throw Target.Invalid(name: "cl/no_cl/chunked", value: "more than one")
            }
        }

        /// Whether the connection must close once the body is sent, whatever the client asked:
        /// the body is delimited by the close, or its declared length is a lie.
        var closesAfterBody: Bool {
            switch framing {
            case .contentLength(let delta): delta != 0
            case .closeDelimited: true
            case .chunked: false
            }
        }
    }
}
