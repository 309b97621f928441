import Logging
import ServiceLifecycle
import UnixSignals

#if canImport(Glibc)
import Glibc
#endif

/// The signals the daemon acts on: SIGHUP reloads; SIGTERM or SIGINT ends this service, and
/// its group (configured with `.gracefullyShutdownGroup` on success) then shuts every other
/// service down gracefully, in reverse order, within ``Daemon/stopDeadline``.
///
/// The daemon calls ``trap()`` before it starts its parts: from then on the signals' default
/// action is off and each one is buffered, so a SIGTERM that comes during start-up stops the
/// daemon once it has started, cleanly, instead of killing it with its index open. A signal
/// never interrupts a thread mid-work: Dispatch watches them on its own queue.
struct SignalService: Service {
    private let signals: UnixSignalsSequence
    private let logger: Logger
    private let reload: @Sendable () async -> Void

    /// Starts trapping SIGTERM, SIGINT and SIGHUP: their default action is turned off, and each
    /// one that comes is kept in the sequence until a service reads it.
    static func trap() async -> UnixSignalsSequence {
        for number in [SIGTERM, SIGINT, SIGHUP] { signal(number, SIG_IGN) }
        return await UnixSignalsSequence(trapping: .sigterm, .sigint, .sighup)
    }

    /// Acts on `signals` (from ``trap()``); `reload` runs on each SIGHUP, one at a time.
    init(signals: UnixSignalsSequence, logger: Logger, reload: @escaping @Sendable () async -> Void) {
        self.signals = signals
        self.logger = logger
        self.reload = reload
    }

    /// Reloads on each SIGHUP; returns at the first SIGTERM or SIGINT (or on cancellation).
    func run() async {
        for await received in signals {
            switch received {
            case .sighup:
                await reload()
            default:
                logger.info("received \(received == .sigterm ? "SIGTERM" : "SIGINT"), stopping")
                return
            }
        }
    }
}
