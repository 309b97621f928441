import ServiceLifecycle

/// Runs ``ReadyListWarmer`` in the daemon's `ServiceGroup`: it starts warming the ready lists
/// once the group runs (after `READY=1`: systemd's readiness stays fast), and lives until the
/// group shuts down. It is the last service but the signals, so it is stopped first: the
/// reading gives up and the URLs outstanding are withdrawn before the downloader stops.
struct ReadinessService: Service {
    let warmer: ReadyListWarmer
    let tracker: ReadinessTracker

    func run() async {
        await withGracefulShutdownHandler {
            await withTaskCancellationHandler {
                await warmer.warmAll()
            } onCancel: {
                warmer.stop()
            }
        } onGracefulShutdown: {
            warmer.stop()
            tracker.stopping.fulfill(())
        }
        // Done reading: stay until the group ends (returning would end the group).
        try? await gracefulShutdown()
        warmer.stop()
        tracker.stopping.fulfill(())
    }
}
