/// The engine's counters: kept on the loop thread in `counters`, published under a lock at the
/// end of each turn (and before any answer), read from any thread through ``snapshot``.
extension TransferEngine {
    /// Counters and gauges as of the loop's last turn.
    var snapshot: DownloaderStatistics { statistics.withLock { $0 } }

    func publishStatistics() {
        counters.running = running.count
        counters.queued = jobs.count - running.count - waitingRetryCount - publishingCount - waitingForSpaceCount
        counters.waitingRetry = waitingRetryCount
        counters.hosts = hosts.count
        counters.throttledNow = throttled.count
        let current = counters
        statistics.withLock { $0 = current }
    }
}
