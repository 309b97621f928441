import Foundation
import ImgdCore
import ImgdTestSupport
import Testing

@testable import ImgdNetwork

/// A due entry is served at every use, and revalidated once for many uses: what a revalidation
/// came to is heard once, not once a use, whether the uses come while it is under way or while
/// its failure is remembered.
@Suite("A due entry's revalidation is heard once", .timeLimit(.minutes(2)), .offThePool)
struct DownloaderFailedRevalidationTests {
    private static func conditionalRequests(_ server: TestHTTPServer) -> Int {
        server.requests.filter { !$0.values(of: "If-None-Match").isEmpty }.count
    }

    /// A downloader revalidating every use (no-cache), whose revalidations' outcomes are collected.
    private static func start() async throws -> (DownloaderFixture, Locked<[Result<CachedImage, DownloadError>]>) {
        let fixture = try await DownloaderFixture(policy: DownloaderFixture.testPolicy { $0.retry.maxAttempts = 1 })
        fixture.downloader.update(refresh: RefreshPolicy(rule: .respectHeaders))
        // One entry for URLs that differ only in how the origin answers them: `cond_status` and
        // `gate` are left out of the key, as a signed URL's signature is, so the validators of
        // one form's response may be sent by another's revalidation (those of another key's
        // URL would not: ``Downloader/validators(of:for:)``).
        fixture.downloader.update(keyPolicy: CacheKeyPolicy(rules: [
            .init(hosts: try HostPattern("127.0.0.1"), ignoredQuery: [try QueryNamePattern("cond_status"), try QueryNamePattern("gate")])
        ]))
        let heard = Locked<[Result<CachedImage, DownloadError>]>([])
        fixture.downloader.observeRevalidations { _, result in heard.withLock { $0.append(result) } }
        return (fixture, heard)
    }

    /// After a failed revalidation of `quick`'s key: once the failure is forgotten, a use by
    /// `quick` (whose conditional requests are answered 304) revalidates the entry, heard as a
    /// success: the failure and the withdrawn uses left nothing behind.
    private static func expectRecovers(
        _ fixture: DownloaderFixture, _ heard: Locked<[Result<CachedImage, DownloadError>]>, by quick: ImageRequest,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let heardBefore = heard.withLock { $0.count }
        fixture.downloader.forgetFailures(of: [quick.key])
        #expect(try await fixture.downloader.fetch(quick).source == .disk, sourceLocation: sourceLocation)
        #expect(await eventually(timeout: .seconds(10)) { heard.withLock { $0.count } == heardBefore + 1 }, sourceLocation: sourceLocation)
        guard case .success(let image)? = heard.withLock({ $0.last }) else {
            Issue.record("the revalidation after the failure did not succeed: \(heard.withLock { $0 })", sourceLocation: sourceLocation)
            return
        }
        #expect(image.source == .disk, "a 304 leaves the file as it is", sourceLocation: sourceLocation)
        #expect(fixture.downloader.statistics.revalidated == 1, sourceLocation: sourceLocation)
    }

    @Test("uses while the revalidation is held by the origin ask nothing more; its failure is heard once; then a 304 revalidates it")
    func usesWhileUnderWay() async throws {
        let (fixture, heard) = try await Self.start()
        // One entry under one key: cached by a URL answered at once, then used by one whose
        // every answer waits for a gate, and whose conditional requests are answered 500.
        let quick = fixture.downloader.request(for: try fixture.url("/fresh/u.png?cc=no-cache"))
        let held = fixture.downloader.request(for: try fixture.url("/fresh/u.png?cc=no-cache&cond_status=500&gate=u"))
        #expect(quick.key == held.key)
        #expect(try await fixture.downloader.fetch(quick).source == .network)
        #expect(try await fixture.downloader.fetch(held).source == .disk)
        #expect(await fixture.server.waitForInFlight(atLeast: 1, timeout: .seconds(10)), "the revalidation reached the origin")
        let withdrawnBefore = fixture.downloader.statistics.coalesced
        for _ in 0..<4 {
            #expect(try await fixture.downloader.fetch(held).source == .disk)
        }
        fixture.server.openGate("u")
        #expect(await eventually(timeout: .seconds(10)) { heard.withLock { $0.count } >= 1 })
        // Another key's failure, asked after the four uses: once it is in, theirs would be too.
        _ = try? await fixture.downloader.fetch(try fixture.url("/status/404"))
        #expect(heard.withLock { $0.count } == 1, "\(heard.withLock { $0 })")
        guard case .failure(let error)? = heard.withLock({ $0.first }) else {
            Issue.record("the revalidation did not fail: \(heard.withLock { $0 })")
            return
        }
        #expect(error.code == "http_500")
        #expect(Self.conditionalRequests(fixture.server) == 1)
        #expect(fixture.downloader.statistics.coalesced == withdrawnBefore, "a use joined the revalidation instead of being withdrawn")
        try await Self.expectRecovers(fixture, heard, by: quick)
        try await fixture.close()
    }

    @Test("uses while the failure is remembered ask nothing and tell nothing; once it is forgotten, the next use asks again; then a 304 revalidates it")
    func usesWhileRemembered() async throws {
        let (fixture, heard) = try await Self.start()
        // One entry under one key: cached by a URL whose conditional requests get a 304,
        // used by one whose conditional requests get a 500.
        let quick = fixture.downloader.request(for: try fixture.url("/fresh/r.png?cc=no-cache"))
        let url = fixture.downloader.request(for: try fixture.url("/fresh/r.png?cc=no-cache&cond_status=500"))
        #expect(quick.key == url.key)
        #expect(try await fixture.downloader.fetch(quick).source == .network)

        // A due use: served from disk, and the revalidation fails.
        #expect(try await fixture.downloader.fetch(url).source == .disk)
        #expect(await eventually(timeout: .seconds(10)) { heard.withLock { $0.count } == 1 })
        guard case .failure(let error)? = heard.withLock({ $0.first }) else {
            Issue.record("the revalidation did not fail: \(heard.withLock { $0 })")
            return
        }
        #expect(error.code == "http_500")
        let rememberedBefore = fixture.downloader.statistics.rememberedFailures

        // Five more uses while the failure is remembered (10 min): each served, each
        // revalidation withdrawn on the engine's thread (counted there), none asked or heard.
        for _ in 0..<5 {
            #expect(try await fixture.downloader.fetch(url).source == .disk)
        }
        #expect(await eventually(timeout: .seconds(10)) {
            fixture.downloader.statistics.rememberedFailures == rememberedBefore + 5
        })
        #expect(heard.withLock { $0.count } == 1, "\(heard.withLock { $0 })")
        #expect(Self.conditionalRequests(fixture.server) == 1)
        #expect(fixture.downloader.statistics.failed == 1)

        // Forgotten (as when the memory lapses), the failure no longer holds the entry back.
        fixture.downloader.forgetFailures(of: [url.key])
        #expect(try await fixture.downloader.fetch(url).source == .disk)
        #expect(await eventually(timeout: .seconds(10)) { heard.withLock { $0.count } == 2 })
        #expect(Self.conditionalRequests(fixture.server) == 2)
        try await Self.expectRecovers(fixture, heard, by: quick)
        try await fixture.close()
    }
}
