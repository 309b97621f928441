import Dispatch
import ImgdCore
import ImgdNetwork
import ImgdStore
import ImgdTestSupport
import Synchronization
import Testing

/// ``Downloader/ping()``, the watchdog's round trip through the engine's loop: it answers while
/// the loop turns, not while a turn is stuck (so the daemon stops telling systemd it is alive),
/// and at once from a stopped engine (so a stop never waits on it).
@Suite("Downloader.ping: the watchdog's round trip through the engine", .timeLimit(.minutes(2)))
struct DownloaderPingTests {
    final class Flag: Sendable {
        let value = Atomic<Bool>(false)
        func set() { value.store(true, ordering: .releasing) }
        var isSet: Bool { value.load(ordering: .acquiring) }
    }

    @Test("answers a live loop; not while the loop is stuck in a callback; then at once when it is free; and after the engine stopped")
    func pingSeesAStuckLoop() async throws {
        try await withFixture { fixture in
            await fixture.downloader.ping()

            // A handler runs on the engine's thread: one that does not return holds the loop.
            let release = DispatchSemaphore(value: 0)
            let inHandler = Flag()
            fixture.downloader.prefetch([try fixture.url("/img/ping.png")], submitter: fixture.downloader.makeSubmitter()) { _, _ in
                inHandler.set()
                release.wait()
            }
            #expect(await eventually(timeout: .seconds(30)) { inHandler.isSet })
            let answered = Flag()
            let pinging = Task {
                await fixture.downloader.ping()
                answered.set()
            }
            // Not a synchronisation: the window in which a stuck loop must not be reported alive.
            try await Task.sleep(for: .milliseconds(500))
            #expect(!answered.isSet, "ping answered while the engine's loop was stuck")
            release.signal()
            await pinging.value
            #expect(answered.isSet)

            await fixture.downloader.shutdown()
            await fixture.downloader.ping()
        }
    }

}
