/// What ``MemoryPressureMonitor`` guards with its mutex.
struct PressureMonitorState {
    /// Events so far, from every origin.
    var eventCount = 0
    /// The source in use (after any fallback).
    var activeSource: MemoryPressureSource
    /// True from the start of ``MemoryPressureMonitor/run(onWatching:)`` until it returns: one run at a time.
    var isRunning = false
    /// Set by the watching thread when it starts; cleared when `run()` returns.
    var isWatching = false
    /// When the last watching thread finished its work (a test seam: how fast cancellation
    /// reaches the thread, apart from how busy Swift's thread pool is when `run()` resumes).
    var threadFinishedAt: ContinuousClock.Instant?
    /// `avg10` readings taken while polling.
    var readings = 0
}
