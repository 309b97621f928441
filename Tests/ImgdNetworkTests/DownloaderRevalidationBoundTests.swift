import Foundation
import ImgdCore
import ImgdTestSupport
import Testing

@testable import ImgdNetwork

/// The queue of revalidations is bounded: which entries are used, and so become due, is up to
/// clients.
@Suite("Revalidations of due entries are bounded", .timeLimit(.minutes(2)), .offThePool)
struct DownloaderRevalidationBoundTests {
    private static func conditionalRequests(_ server: TestHTTPServer) -> Int {
        server.requests.filter { !$0.values(of: "If-None-Match").isEmpty }.count
    }

    @Test("past maxPendingRevalidations a due entry is served without one; once they are answered, the next use revalidates")
    func bounded() async throws {
        let fixture = try await DownloaderFixture(policy: DownloaderFixture.testPolicy { $0.maxPendingRevalidations = 2 })
        fixture.downloader.update(refresh: RefreshPolicy(rule: .respectHeaders))
        // no-cache: every use is due; each response (and each 304) takes 400 ms.
        let urls = try (0..<5).map { try fixture.url("/fresh/b\($0).png?cc=no-cache&delay_ms=400") }
        for url in urls { _ = try await fixture.downloader.fetch(url) }
        #expect(Self.conditionalRequests(fixture.server) == 0)

        // Five due uses at once: each answered from disk at once, two revalidations taken.
        for url in urls {
            let image = try await fixture.downloader.fetch(url)
            #expect(image.source == .disk)
        }
        #expect(await eventually(timeout: .seconds(10)) { Self.conditionalRequests(fixture.server) == 2 })
        // Answered (304), the two give their places back; nothing else was queued meanwhile.
        #expect(await eventually(timeout: .seconds(10)) { fixture.downloader.statistics.revalidated == 2 })
        #expect(Self.conditionalRequests(fixture.server) == 2)

        // The entries skipped are still due: their next use revalidates them.
        for url in urls[2...] { _ = try await fixture.downloader.fetch(url) }
        #expect(await eventually(timeout: .seconds(10)) { Self.conditionalRequests(fixture.server) == 4 })
        try await fixture.close()
    }
}
