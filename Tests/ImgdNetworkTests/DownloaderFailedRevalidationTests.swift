import Foundation
import ImgdCore
import ImgdTestSupport
import Testing

@testable import ImgdNetwork

/// A due entry's revalidation that fails is remembered like any failure of its URL: the entry
/// keeps being served, and its failure is told once, not at every use.
@Suite("A failed revalidation of a due entry is told once", .timeLimit(.minutes(2)), .offThePool)
struct DownloaderFailedRevalidationTests {
    private static func conditionalRequests(_ server: TestHTTPServer) -> Int {
        server.requests.filter { !$0.values(of: "If-None-Match").isEmpty }.count
    }

    @Test("the observer hears the failure once; uses while it is remembered ask nothing and tell nothing; once it lapses, the next use asks again")
    func toldOnce() async throws {
        let fixture = try await DownloaderFixture(policy: DownloaderFixture.testPolicy {
            $0.failureMemory = .seconds(2)
            $0.retry.maxAttempts = 1
        })
        fixture.downloader.update(refresh: RefreshPolicy(rule: .respectHeaders))
        let heard = Locked<[Result<CachedImage, DownloadError>]>([])
        fixture.downloader.observeRevalidations { _, result in heard.withLock { $0.append(result) } }
        // no-cache: every use is due; the origin answers conditional requests 500.
        let url = try fixture.url("/fresh/told-once.png?cc=no-cache&cond_status=500")
        let cached = try await fixture.downloader.fetch(url)
        #expect(cached.source == .network)

        // A due use: served from disk, and the revalidation fails.
        #expect(try await fixture.downloader.fetch(url).source == .disk)
        #expect(await eventually(timeout: .seconds(10)) { heard.withLock { $0.count } == 1 })
        guard case .failure(let error)? = heard.withLock({ $0.first }) else {
            Issue.record("the revalidation did not fail: \(heard.withLock { $0 })")
            return
        }
        #expect(error.code == "http_500")
        let rememberedBefore = fixture.downloader.statistics.rememberedFailures

        // Five more uses while the failure is remembered: each served, each revalidation
        // withdrawn on the engine's thread (counted there), none asked or heard.
        for _ in 0..<5 {
            #expect(try await fixture.downloader.fetch(url).source == .disk)
        }
        #expect(await eventually(timeout: .seconds(10)) {
            fixture.downloader.statistics.rememberedFailures == rememberedBefore + 5
        })
        #expect(heard.withLock { $0.count } == 1, "\(heard.withLock { $0 })")
        #expect(Self.conditionalRequests(fixture.server) == 1)
        #expect(fixture.downloader.statistics.failed == 1)

        // Once the 2 s memory lapses, a use asks again (and its failure is heard again).
        let deadline = ContinuousClock.now + .seconds(10)
        while Self.conditionalRequests(fixture.server) < 2, ContinuousClock.now < deadline {
            #expect(try await fixture.downloader.fetch(url).source == .disk)
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(Self.conditionalRequests(fixture.server) == 2)
        #expect(await eventually(timeout: .seconds(10)) { heard.withLock { $0.count } == 2 })
        try await fixture.close()
    }
}
