import ServiceLifecycle

/// Tells systemd how the daemon is doing while it runs: `STATUS=` every 2 seconds, and
/// `WATCHDOG=1` at half the watchdog interval, only while the transfer engine's loop and the
/// spool's queue both answer (the loops that could hang).
struct ProgressReporter: Service {
    let notifier: SystemdNotifier
    /// A round trip through every loop that could hang; returns once each has answered.
    let probe: @Sendable () async -> Void
    /// The status line (`warming 1234/5000 in 2 lists; cache 812 MiB of 1 GiB`).
    let status: @Sendable () -> String

    /// Reports until the group's graceful shutdown (or cancellation).
    func run() async {
        let ping = notifier.watchdogInterval.map { $0 / 2 } ?? .seconds(2)
        let interval = min(ping, .seconds(2))
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                do {
                    try await Task.sleep(for: interval)
                } catch {
                    return
                }
                await probe()
                guard !Task.isCancelled else { return }
                notifier.status(status())
                notifier.watchdog()
            }
        }
    }
}
