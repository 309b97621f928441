import ImgdCore
import ImgdTestSupport
import Synchronization
import Testing

@testable import ImgdNetwork

/// The held-request count (what `max-queued` bounds) is given back exactly once per request,
/// whichever of the engine's answer and the waiting task's cancellation comes first.
@Suite("Downloader: held requests are given back once", .timeLimit(.minutes(5)), .offThePool)
struct DownloaderHeldRequestTests {
    static func isCancelled(_ outcome: FetchToken.Outcome) -> Bool {
        if case .failure(.cancelled) = outcome { true } else { false }
    }

    @Test("a fetch cancelled before it waits, its cancel answered by the engine before the continuation is attached: the count is given back once, not twice")
    func cancelAnsweredBeforeAttach() async throws {
        let held = HeldRequests()
        let url = try ImageURL("http://127.0.0.1:1/a.png")
        #expect(held.take(1, bytes: HeldRequests.bytes(of: url), limit: nil))
        let token = FetchToken(url: url, priority: .onDemand, submitter: .interactive, held: held)
        // The task's cancellation handler, then the engine's `cancelWait`, then `attach`.
        #expect(token.cancel())
        token.answer(.failure(.cancelled))
        #expect(!token.beginWaiting())
        let outcome = await token.outcome
        #expect(Self.isCancelled(outcome))
        #expect(held.value == 0 && held.bytes == 0)
    }

    @Test("attached first, then cancelled and answered: given back once")
    func cancelAfterAttach() async throws {
        let held = HeldRequests()
        let url = try ImageURL("http://127.0.0.1:1/b.png")
        #expect(held.take(1, bytes: HeldRequests.bytes(of: url), limit: nil))
        let token = FetchToken(url: url, priority: .onDemand, submitter: .interactive, held: held)
        #expect(token.beginWaiting())
        #expect(token.cancel())
        token.answer(.failure(.cancelled))
        token.answer(.failure(.cancelled))
        let outcome = await token.outcome
        #expect(Self.isCancelled(outcome))
        #expect(held.value == 0 && held.bytes == 0)
    }

    @Test("2,000 fetches of a gated URL, each cancelled as it starts: the held count ends at exactly 0 and is never seen below 0")
    func manyCancelledFetches() async throws {
        try await withFixture { fixture in
            let lowest = Atomic<Int>(0)
            let watching = Atomic<Bool>(true)
            let watcher = Task.detached {
                while watching.load(ordering: .relaxed) {
                    let value = fixture.downloader.heldRequests
                    if value < lowest.load(ordering: .relaxed) { lowest.store(value, ordering: .relaxed) }
                    await Task.yield()
                }
            }
            await withTaskGroup(of: Void.self) { group in
                for index in 0..<2_000 {
                    let url = try! fixture.url("/img/held\(index % 50).png?w=4&h=4&gate=held")
                    let task = Task { _ = try? await fixture.downloader.fetch(url) }
                    task.cancel()
                    group.addTask { await task.value }
                }
            }
            #expect(await eventually { fixture.downloader.heldRequests == 0 }, "held: \(fixture.downloader.heldRequests)")
            watching.store(false, ordering: .relaxed)
            await watcher.value
            #expect(lowest.load(ordering: .relaxed) == 0)
            #expect(fixture.downloader.heldRequests == 0)
            #expect(fixture.downloader.heldRequestBytes == 0)
            fixture.server.openGate("held")
        }
    }
}
