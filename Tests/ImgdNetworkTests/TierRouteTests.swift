import ImgdCore
import ImgdTestSupport
import Testing

@testable import ImgdNetwork

/// The tier's URL form (contrib/fleet/README.md, "URL form"), and the downloader stepping around
/// a tier that does not answer — without nginx (FleetTierTests runs the real one).
@Suite("Tier route", .timeLimit(.minutes(5)), .offThePool)
struct TierRouteTests {
    @Test(
        "every origin URL becomes <tier>/<scheme>/<host[:port]><path?query>, from its normalized form",
        arguments: [
            ("https://cdn.example.com/p/1.png?w=2", "http://tier:8080/https/cdn.example.com/p/1.png?w=2"),
            ("http://origin:81/p", "http://tier:8080/http/origin:81/p"),
            ("https://[2001:db8::1]:8443/x", "http://tier:8080/https/[2001:db8::1]:8443/x"),
            ("https://CDN.Example.com:443/A/b.PNG", "http://tier:8080/https/cdn.example.com/A/b.PNG"),
            ("http://h:80/p#frag", "http://tier:8080/http/h/p"),
            ("http://h/a%2Fb/c%20d.png?x=%26&y", "http://tier:8080/http/h/a%2Fb/c%20d.png?x=%26&y"),
            ("http://h", "http://tier:8080/http/h/"),
            ("http://h?q=1", "http://tier:8080/http/h/?q=1"),
        ])
    func urlForm(origin: String, expected: String) throws {
        let tier = try TierRoute("http://tier:8080")
        #expect(tier.requestURL(for: try ImageURL(origin)) == expected)
    }

    @Test("a trailing slash or a path prefix in the tier's URL is kept once")
    func base() throws {
        let url = try ImageURL("https://h/p.png")
        #expect(try TierRoute("http://tier:8080/").requestURL(for: url) == "http://tier:8080/https/h/p.png")
        #expect(try TierRoute("https://tier.example/fleet//").requestURL(for: url) == "https://tier.example/fleet/https/h/p.png")
    }

    @Test("a URL with user info goes to its origin directly")
    func userInfo() throws {
        #expect(try TierRoute("http://tier:8080").requestURL(for: try ImageURL("https://user:secret@h/p.png")) == nil)
    }

    @Test(
        "a tier setting that is not an http(s) URL of a host is refused",
        arguments: ["ftp://tier/", "tier:8080", "http://", "http://tier/?q=1", "http://u:p@tier/", "http://tier/#f", "", "http://ti er/"])
    func invalid(text: String) {
        #expect(throws: TierRouteError.self) { try TierRoute(text) }
    }

    @Test("a tier that does not answer: the origin is asked directly in the same attempt, counted; without fallback it is a connect failure")
    func silentTier() async throws {
        let closed = try NginxTier.freePort()
        let tier = try TierRoute("http://127.0.0.1:\(closed)")
        let policy = DownloaderFixture.testPolicy {
            $0.tier = tier
            $0.retry.maxAttempts = 1
        }
        try await withFixture(policy: policy) { fixture in
            let image = try await fixture.downloader.fetch(fixture.url("/img/around.png?w=3&h=3"))
            #expect(image.download?.finalURL == fixture.server.url("/img/around.png?w=3&h=3"))
            #expect(image.download?.attempts == 1)
            #expect(fixture.server.requestLog == ["/img/around.png?w=3&h=3"])
            let statistics = fixture.downloader.statistics
            #expect(statistics.tierFallbacks == 1 && statistics.retries == 0 && statistics.started == 1, "\(statistics)")

            var strict = policy
            strict.tier?.fallback = false
            fixture.downloader.update(policy: strict)
            let error = try await fixture.failure("/img/not-around.png")
            #expect(error?.code == "connect", "\(String(describing: error))")
            #expect(fixture.server.requestCount("/img/not-around.png") == 0)
            #expect(fixture.downloader.statistics.tierFallbacks == 1)
        }
    }

    @Test("an answer without X-Tier-Error is the origin's: a 404 from the tier is http_404, no fallback")
    func unmarkedAnswer() async throws {
        // The test server plays a tier that answers 404 for every tier-form path.
        let tierServer = try await TestHTTPServer.start()
        let policy = DownloaderFixture.testPolicy {
            $0.tier = try? TierRoute(tierServer.origin)
            $0.retry.maxAttempts = 1
        }
        try await withFixture(policy: policy) { fixture in
            let target = "/img/unmarked.png"
            let error = try await fixture.failure(target)
            #expect(error?.code == "http_404")
            #expect(tierServer.requestLog == ["/http/127.0.0.1:\(fixture.server.port)\(target)"])
            #expect(fixture.server.totalRequests == 0)
            #expect(fixture.downloader.statistics.tierFallbacks == 0)
        }
        try await tierServer.shutdown()
    }
}
