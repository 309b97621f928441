import ImgdCore

/// Reports memory pressure: from the source resolved at start (PSI, systemd's
/// `MEMORY_PRESSURE_WATCH`, or `avg10` polling), and from ``trigger()`` (the `purge` command).
///
/// Each event calls `onPressure` once, with a ``MemoryPressureEvent``. The daemon purges the
/// memory tier there and calls ``MallocTrim/releaseFreeMemory()``.
///
/// ``run(onWatching:)`` is a service: it watches until its task is cancelled. The blocking wait runs on a
/// thread of its own, so no thread of the cooperative pool is held; cancellation wakes it at once.
public final class MemoryPressureMonitor: Sendable {
    /// The source asked for; ``activeSource`` is the one in use.
    public let source: MemoryPressureSource
    private let pollingThreshold: Double
    private let pollingInterval: Duration
    private let onPressure: @Sendable (MemoryPressureEvent) -> Void
    /// Test seam: called with the descriptors a run holds open (watch and wake signal), before
    /// its thread starts, so tests can check every one is closed when `run()` returns.
    private let onDescriptorsOpened: (@Sendable ([Int32]) -> Void)?
    /// Guards the event count, the source in use, and the run's progress flags. Never held while
    /// calling `onPressure`.
    private let state: Locked<PressureMonitorState>

    /// A monitor of `source`, calling `onPressure` for each event: on the monitor's own thread
    /// for system events, on the caller's thread for ``trigger()``. The callback must be quick
    /// (hand work to a task or queue); the next event waits for it.
    ///
    /// When the kernel refuses a PSI trigger, the monitor polls `avg10` instead, every
    /// `pollingInterval` (5 seconds by default), reporting when it rises above
    /// `pollingThreshold` percent (10.0 by default).
    public convenience init(
        source: MemoryPressureSource,
        pollingThreshold: Double = MemoryPressureSource.defaultPollingThreshold,
        pollingInterval: Duration = MemoryPressureSource.defaultPollingInterval,
        onPressure: @escaping @Sendable (MemoryPressureEvent) -> Void
    ) {
        self.init(
            source: source, pollingThreshold: pollingThreshold, pollingInterval: pollingInterval,
            onDescriptorsOpened: nil, onPressure: onPressure)
    }

    init(
        source: MemoryPressureSource,
        pollingThreshold: Double,
        pollingInterval: Duration,
        onDescriptorsOpened: (@Sendable ([Int32]) -> Void)?,
        onPressure: @escaping @Sendable (MemoryPressureEvent) -> Void
    ) {
        self.source = source
        self.pollingThreshold = pollingThreshold
        self.pollingInterval = pollingInterval
        self.onDescriptorsOpened = onDescriptorsOpened
        self.onPressure = onPressure
        state = Locked(PressureMonitorState(activeSource: source))
    }

    /// Events reported so far, from every origin.
    public var eventCount: Int { state.withLock { $0.eventCount } }

    /// The source in use: ``source`` until ``run(onWatching:)`` has opened it; then the one
    /// opened (polling when the kernel refused the PSI trigger); disabled, with the error as its
    /// reason, once a run has failed.
    public var activeSource: MemoryPressureSource { state.withLock { $0.activeSource } }

    /// True once the watching thread is running (named, about to wait), until `run()` returns.
    var isWatching: Bool { state.withLock { $0.isWatching } }

    /// When the last watching thread finished its work.
    var threadFinishedAt: ContinuousClock.Instant? { state.withLock { $0.threadFinishedAt } }

    /// `avg10` readings taken while polling.
    var readings: Int { state.withLock { $0.readings } }

    /// Reports a pressure event from the `purge` command: counted and passed to `onPressure`
    /// like any other, on the calling thread. Works whether or not ``run(onWatching:)`` is running.
    public func trigger() {
        report(origin: "command")
    }

    /// Watches until the calling task is cancelled, then returns after the watching thread has
    /// exited and every descriptor it used is closed.
    ///
    /// Once the source is open, and before any event, `onWatching` is called (on the calling
    /// task) with what is watched: the source in use after any fallback, for the log.
    ///
    /// Throws when the source cannot be opened (except a refused PSI trigger, which falls back
    /// to polling; see ``activeSource``), or when watching fails later: the socket's other end
    /// closes, the kernel flags the PSI file, a read fails. Either way ``activeSource`` is then
    /// disabled. A disabled source watches nothing and returns on cancellation. One run at a time.
    public func run(onWatching: (MemoryPressureWatching) -> Void = { _ in }) async throws(MemoryPressureError) {
        state.withLock { state in
            precondition(!state.isRunning, "MemoryPressureMonitor.run() is already running")
            state.isRunning = true
        }
        defer {
            state.withLock { state in
                state.isRunning = false
                state.isWatching = false
            }
        }
        do {
            try await watch(onWatching: onWatching)
        } catch {
            state.withLock { $0.activeSource = .disabled(reason: error.description) }
            throw error
        }
    }

    private func watch(onWatching: (MemoryPressureWatching) -> Void) async throws(MemoryPressureError) {
        let watch = try PressureWatch.open(source, pollingThreshold: pollingThreshold, pollingInterval: pollingInterval)
        state.withLock { $0.activeSource = watch.source }
        onWatching(MemoryPressureWatching(source: watch.source, refusal: watch.refusal))
        // The thread's outcome, for the task waiting below (whichever of the two gets there first).
        let completion = Promise<Result<Void, MemoryPressureError>>()
        if case .disabled = watch.mode {
            // Nothing to watch and no thread: the run lasts until it is cancelled.
            _ = try? await completion.wait()
            return
        }

        let wake: WakeSignal
        do throws(MemoryPressureError) {
            wake = try WakeSignal()
        } catch {
            watch.close()
            throw error
        }
        onDescriptorsOpened?(watch.descriptors + wake.descriptors)
        let loop = PressureLoop(
            watch: watch, wakeDescriptor: wake.readEnd,
            emit: { [self] in report(origin: watch.origin) },
            onReading: { [self] _ in state.withLock { $0.readings += 1 } })
        let thread: PressureThread
        do throws(MemoryPressureError) {
            thread = try PressureThread.spawn(name: "imgd-pressure") { [self] in
                state.withLock { $0.isWatching = true }
                let outcome = Result { () throws(MemoryPressureError) in try loop.run() }
                watch.close()
                wake.close()
                let finished = ContinuousClock.now
                state.withLock { $0.threadFinishedAt = finished }
                completion.fulfill(outcome)
            }
        } catch {
            watch.close()
            wake.close()
            throw error
        }
        let outcome = await withTaskCancellationHandler {
            await completion.value
        } onCancel: {
            wake.signal()
        }
        thread.join()
        try outcome.get()
    }

    private func report(origin: String) {
        let count = state.withLock { state in
            state.eventCount += 1
            return state.eventCount
        }
        onPressure(MemoryPressureEvent(origin: origin, count: count))
    }
}
