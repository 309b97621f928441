import ServiceLifecycle

/// Runs the courtesy loop: a turn every ``Courtesy/interval`` until the daemon stops.
struct CourtesyService: Service {
    let courtesy: Courtesy

    func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                courtesy.turn(now: .now)
                try? await Task.sleep(for: Courtesy.interval)
            }
        }
    }
}
