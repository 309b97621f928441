import Foundation
import ImgdCore
import ImgdTestSupport
import Testing

@testable import ImgdNetwork

/// The batch API `imgd prefetch` uses: many URLs in one call, answered on the engine's thread.
@Suite("Batch prefetch", .timeLimit(.minutes(5)), .offThePool)
struct DownloaderPrefetchTests {
    /// Collects handler calls; the mutex guards the list (handlers run on the engine thread).
    final class Answers: Sendable {
        private let results = Locked<[(String, Result<CachedImage, DownloadError>)]>([])
        var count: Int { results.withLock { $0.count } }
        var all: [(String, Result<CachedImage, DownloadError>)] { results.withLock { $0 } }
        func record(_ url: ImageURL, _ result: Result<CachedImage, DownloadError>) {
            results.withLock { $0.append((url.normalized, result)) }
        }
    }

    @Test("every URL is answered exactly once — successes, failures, duplicates, cached — and the gauges return to zero")
    func answersEachOnce() async throws {
        try await withFixture(policy: DownloaderFixture.testPolicy { $0.retry.maxAttempts = 1 }) { fixture in
            let cached = try fixture.url("/img/cached.png")
            _ = try await fixture.downloader.fetch(cached)
            let targets = (0..<60).map { "/img/b\($0).png" } + ["/status/404", "/html", "/img/b0.png", "/img/cached.png"]
            let urls = try targets.map(fixture.url)
            let answers = Answers()
            fixture.downloader.prefetch(urls, submitter: fixture.downloader.makeSubmitter()) { url, result in
                answers.record(url, result)
            }
            #expect(await eventually { answers.count == urls.count })
            let byURL = Dictionary(grouping: answers.all, by: \.0)
            #expect(byURL.count == urls.count - 1, "b0 appears twice")
            #expect(byURL[fixture.server.url("/img/b0.png")]?.count == 2)
            #expect(try byURL[cached.normalized]?.first?.1.get().source == .disk)
            #expect(byURL[fixture.server.url("/status/404")]?.first.map { (try? $0.1.get()) == nil } == true)
            let failures = answers.all.filter { (try? $0.1.get()) == nil }.count
            #expect(failures == 2)
            #expect(fixture.server.requestCount("/img/b0.png") == 1)
            #expect(await eventually {
                let stats = fixture.downloader.statistics
                return stats.queued == 0 && stats.running == 0 && stats.waitingRetry == 0
            })
        }
    }

    @Test("cancel(submitter:) answers the rest of a batch with cancelled; other submitters go on")
    func cancelSubmitter() async throws {
        try await withFixture(policy: DownloaderFixture.testPolicy { $0.maxParallel = 1 }) { fixture in
            let withdrawn = fixture.downloader.makeSubmitter()
            let kept = fixture.downloader.makeSubmitter()
            let answers = Answers()
            let blocked = try (0..<20).map { try fixture.url("/img/w\($0).png?gate=go") }
            fixture.downloader.prefetch(blocked, submitter: withdrawn) { answers.record($0, $1) }
            #expect(await fixture.server.waitForInFlight(atLeast: 1, timeout: .seconds(5)))
            let other = try fixture.url("/img/kept.png")
            let otherAnswer = Answers()
            fixture.downloader.prefetch([other], submitter: kept) { otherAnswer.record($0, $1) }
            fixture.downloader.cancel(submitter: withdrawn)
            #expect(await eventually { answers.count == 20 })
            #expect(answers.all.allSatisfy { (try? $0.1.get()) == nil })
            fixture.server.openGate("go")
            #expect(await eventually { otherAnswer.count == 1 })
            #expect(try otherAnswer.all.first?.1.get().source == .network)
            #expect(fixture.server.requestCount(prefix: "/img/w") == 1, "only the running one was ever requested")
        }
    }
}
