import Logging
import ServiceLifecycle

/// Runs the memory-pressure watch as a service of the daemon. A watch that fails is logged and
/// not restarted (the `purge` command still works); the service then waits for the group's
/// shutdown like the others, so one failed source never stops the daemon.
struct PressureWatchService: Service {
    let pressure: MemoryPressureService
    let logger: Logger

    func run() async {
        do {
            try await cancelWhenGracefulShutdown { try await pressure.run() }
        } catch is CancellationError {
            return
        } catch {
            logger.warning("memory pressure watch ended: \(error); the purge command still works")
            try? await gracefulShutdown()
        }
    }
}
