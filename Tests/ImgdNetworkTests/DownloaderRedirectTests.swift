import Foundation
import ImgdCore
import ImgdStore
import ImgdTestSupport
import Testing

@testable import ImgdNetwork

/// Redirects as the engine takes them (libcurl follows none): a `Location` is resolved against
/// the URL that was requested, each hop is checked and fetched as part of the same attempt, and
/// what cannot be followed is reported as the status it came with.
@Suite("Redirects taken by the engine", .timeLimit(.minutes(5)), .offThePool)
struct DownloaderRedirectTests {
    static func redirect(to location: String) -> String {
        "/redirect?to=" + location.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
    }

    @Test(
        "a relative Location is resolved against the URL that was requested",
        arguments: [
            ("img/rel-a.png?w=5&h=6", "/img/rel-a.png?w=5&h=6"),
            ("./x/../img/rel-b.png?w=3&h=3", "/img/rel-b.png?w=3&h=3"),
            ("/img/rel-c.png", "/img/rel-c.png"),
            ("?to=%2Fimg%2Frel-d.png", "/img/rel-d.png"),
        ])
    func relativeLocation(location: String, landsOn: String) async throws {
        try await withFixture(policy: DownloaderFailureTests.oneAttempt) { fixture in
            let image = try await fixture.downloader.fetch(fixture.url(Self.redirect(to: location)))
            #expect(image.download?.finalURL == fixture.server.url(landsOn))
            #expect(try Array(Data(contentsOf: URL(fileURLWithPath: image.path))) == TestHTTPServer.body(for: landsOn))
            #expect(fixture.server.requestCount(landsOn) == 1, "\(fixture.server.requestLog)")
            // The job is the redirecting URL's: its key, not the target's.
            #expect(image.key == (try fixture.url(Self.redirect(to: location))).cacheKey)
            #expect(fixture.downloader.statistics.started == 1 && fixture.downloader.statistics.retries == 0)
        }
    }

    @Test("a loop ends after max-redirects hops, as one attempt, never retried")
    func loopWithFewerHops() async throws {
        let policy = DownloaderFixture.testPolicy {
            $0.maxRedirects = 2
            $0.retry.maxAttempts = 3
        }
        try await withFixture(policy: policy) { fixture in
            let error = try await fixture.failure("/loop/0")
            #expect(error == .tooManyRedirects(limit: 2))
            #expect(fixture.server.requestLog == ["/loop/0", "/loop/1", "/loop/2"])
            #expect(fixture.downloader.statistics.started == 1 && fixture.downloader.statistics.retries == 0)
        }
    }

    @Test("exactly max-redirects hops are followed")
    func hopsUpToTheLimit() async throws {
        let policy = DownloaderFixture.testPolicy { $0.maxRedirects = 3 }
        try await withFixture(policy: policy) { fixture in
            let last = "/img/chain.png?w=4&h=4"
            var target = last
            for _ in 0..<3 { target = Self.redirect(to: target) }
            let image = try await fixture.downloader.fetch(fixture.url(target))
            #expect(image.download?.finalURL == fixture.server.url(last))
            #expect(fixture.server.totalRequests == 4)
        }
    }

    @Test("a 3xx without a Location fails as its status", arguments: [301, 302, 303, 307, 308, 300])
    func noLocation(status: Int) async throws {
        try await withFixture(policy: DownloaderFailureTests.oneAttempt) { fixture in
            let error = try await fixture.failure("/status/\(status)")
            #expect(error?.code == "http_\(status)")
            #expect(fixture.server.totalRequests == 1)
        }
    }

    @Test("a Location that is not a URL fails as the redirect's status")
    func unparsableLocation() async throws {
        try await withFixture(policy: DownloaderFailureTests.oneAttempt) { fixture in
            let error = try await fixture.failure(Self.redirect(to: "http://[::1/x.png"))
            #expect(error?.code == "http_302")
        }
    }

    @Test("the requests of one attempt share its time: two 1.5 s waits do not fit in a 2 s attempt")
    func chainSharesTheAttemptsTime() async throws {
        let policy = DownloaderFixture.testPolicy {
            $0.totalTimeout = .seconds(2)
            $0.retry.maxAttempts = 1
        }
        try await withFixture(policy: policy) { fixture in
            // Each request alone fits; their sum (at least 3 s) cannot, however loaded the machine.
            let error = try await fixture.failure(Self.redirect(to: "/img/late-hop.png?delay_ms=1500") + "&delay_ms=1500")
            #expect(error?.code == "timeout", "\(String(describing: error))")
        }
    }

    @Test("a transient failure after a hop retries the whole chain from the job's URL")
    func retryStartsOver() async throws {
        let policy = DownloaderFixture.testPolicy { $0.retry.maxAttempts = 2 }
        try await withFixture(policy: policy) { fixture in
            let flaky = "/flaky/hop.png?w=4&h=4&fail=1&status=503"
            let start = Self.redirect(to: flaky)
            let image = try await fixture.downloader.fetch(fixture.url(start))
            #expect(fixture.server.requestLog == [start, flaky, start, flaky])
            #expect(image.download?.attempts == 2)
            #expect(fixture.downloader.statistics.retries == 1)
        }
    }
}
