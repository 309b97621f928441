import ImgdCore
import ServiceLifecycle

/// Keeps the calendar windows on time: acts on the position now, sleeps until the next change
/// (at most a minute, so a step of the system clock is noticed), and again. A reload acts on
/// its own and cuts the sleep short (``CalendarWindows/update(schedule:base:)``).
struct WindowService: Service {
    let windows: CalendarWindows

    func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                let next = windows.apply(at: CalendarWindows.now())
                await windows.sleep(until: next)
            }
        }
    }
}
