import Foundation
import ImgdCore
import ImgdTestSupport
import Testing

@testable import ImgdNetwork

/// A redirect's hop is a request to its target's host: that host's cap, `rate` and `Retry-After`
/// govern it, and the redirecting host's slot is free once its response is done. Host A is the
/// fixture's server as `127.0.0.1`; host B a second server, reached as `localhost` (host tables
/// match names, not ports).
@Suite("Redirects counted against the host they go to", .serialized, .timeLimit(.minutes(5)), .offThePool)
struct DownloaderRedirectHostTests {
    /// Runs `body` with a fixture whose policy has `rules` (for A, `127.0.0.1`, and B,
    /// `localhost`), and the second server B.
    private func withTwoHosts(
        a: ((inout HostRules.Rule) -> Void)? = nil, b: (inout HostRules.Rule) -> Void, attempts: Int = 1,
        _ body: (DownloaderFixture, TestHTTPServer) async throws -> Void
    ) async throws {
        var rules: [HostRules.Rule] = []
        var ruleB = HostRules.Rule(hosts: try HostPattern("localhost"))
        b(&ruleB)
        rules.append(ruleB)
        if let a {
            var ruleA = HostRules.Rule(hosts: try HostPattern("127.0.0.1"))
            a(&ruleA)
            rules.append(ruleA)
        }
        let policy = DownloaderFixture.testPolicy {
            $0.retry.maxAttempts = attempts
            $0.hosts = HostRules(rules: rules)
        }
        let hostB = try await TestHTTPServer.start()
        do {
            try await withFixture(policy: policy) { fixture in try await body(fixture, hostB) }
            try await hostB.shutdown()
        } catch {
            try? await hostB.shutdown()
            throw error
        }
    }

    /// A's URL that redirects to `pathAndQuery` on B.
    private func viaA(_ fixture: DownloaderFixture, to pathAndQuery: String, on hostB: TestHTTPServer) throws -> ImageURL {
        try fixture.url(DownloaderRedirectTests.redirect(to: "http://localhost:\(hostB.port)\(pathAndQuery)"))
    }

    @Test("explain: a hop waiting for B at its cap is queued for B, named as the job's pending hop; every host's queue is empty again after")
    func explainCountsTheHopUnderItsTarget() async throws {
        try await withTwoHosts(b: { $0.maxPerHost = 1 }) { fixture, hostB in
            let holding = try ImageURL("http://localhost:\(hostB.port)/img/held.png?gate=explain-hop")
            let hop = try viaA(fixture, to: "/img/after.png", on: hostB)
            let downloader = fixture.downloader
            let answers = Task { await prefetchAll([holding], with: downloader) }
            #expect(await hostB.waitForInFlight(atLeast: 1, timeout: .seconds(10)))
            let hopAnswers = Task { await prefetchAll([hop], with: downloader) }
            var waiting: EngineExplanation?
            #expect(await eventually(timeout: .seconds(10)) {
                waiting = await downloader.explain(downloader.cacheKey(for: hop), url: hop)
                return waiting?.download?.pendingHopHost != nil
            })
            #expect(waiting?.download?.state == "queued" && waiting?.download?.pendingHopHost == "localhost:\(hostB.port)")
            // Counted under B, the host its next request goes to, not under A.
            #expect(waiting?.host.hostKey == hop.hostKey && waiting?.host.queued == 0)
            let atB = await downloader.explain(downloader.cacheKey(for: holding), url: holding)
            #expect(atB.host.queued == 1 && atB.host.running == 1 && atB.host.cap == 1, "\(atB.host)")
            #expect(atB.download?.state == "running" && atB.download?.viaTier == false)
            hostB.openGate("explain-hop")
            _ = await answers.value
            let results = await hopAnswers.value
            #expect((try? results[hop.normalized]?.get()) != nil)
            for url in [holding, hop] {
                let after = await downloader.explain(downloader.cacheKey(for: url), url: url)
                #expect(after.host.queued == 0 && after.queued == 0 && after.download == nil, "\(after.host)")
                #expect(after.outcomes.map(\.kind) == [.fetched])
            }
        }
    }

    @Test("B's rate spaces the hops to B by its interval, however many of A's URLs redirect there")
    func rateOfTheTarget() async throws {
        let interval = Duration.milliseconds(400)
        try await withTwoHosts(b: { $0.requestInterval = interval }) { fixture, hostB in
            let urls = try (0..<4).map { try viaA(fixture, to: "/img/r\($0).png", on: hostB) }
            let results = await prefetchAll(urls, with: fixture.downloader)
            for url in urls { #expect((try? results[url.normalized]?.get()) != nil, "\(String(describing: results[url.normalized]))") }
            let arrivals = hostB.requests.filter { $0.target.hasPrefix("/img/r") }.map(\.arrivedAt).sorted()
            #expect(arrivals.count == 4)
            // The engine starts them an interval apart; their arrival may jitter by a connection's set-up.
            for (earlier, later) in zip(arrivals, arrivals.dropFirst()) {
                #expect(later - earlier >= interval - .milliseconds(100), "hops to B \(later - earlier) apart under a 400 ms rate")
            }
            // A has no rate: its four requests were not spaced.
            #expect(fixture.server.requestCount(prefix: "/redirect") == 4)
        }
    }

    @Test(
        "B's max-per-host caps the hops to B; a hop holds a slot of B's, not of A's, which is free once A's response is done",
        arguments: [1, 4])
    func capOfTheTarget(capOfA: Int) async throws {
        try await withTwoHosts(a: { $0.maxPerHost = capOfA }, b: { $0.maxPerHost = 1 }) { fixture, hostB in
            let urls = try (0..<3).map { try viaA(fixture, to: "/img/c\($0).png?gate=b", on: hostB) }
            let answers = DownloaderPrefetchTests.Answers()
            fixture.downloader.prefetch(urls, submitter: fixture.downloader.makeSubmitter()) { answers.record($0, $1) }
            // Every redirect is answered while B holds the first hop: A's slot went with A's response.
            #expect(await eventually(timeout: .seconds(10)) { fixture.server.requestCount(prefix: "/redirect") == 3 },
                    "A answered \(fixture.server.requestCount(prefix: "/redirect")) of 3 while a hop to B was held")
            #expect(await hostB.waitForInFlight(atLeast: 1, timeout: .seconds(10)))
            #expect(!(await eventually(timeout: .milliseconds(500)) { hostB.inFlight > 1 }), "\(hostB.inFlight) hops to B at once with its max-per-host 1")
            hostB.openGate("b")
            #expect(await eventually(timeout: .seconds(20)) { answers.count == 3 })
            for (url, result) in answers.all { #expect((try? result.get()) != nil, "\(url): \(result)") }
            #expect(hostB.maxInFlight == 1)
            #expect(fixture.downloader.statistics.started == 3, "a held hop is the same attempt")
            #expect(await eventually(timeout: .seconds(5)) { fixture.downloader.statistics.hosts == 0 }, "every slot given back")
        }
    }

    @Test("a Retry-After from B holds the next hop to B, not a request to A")
    func retryAfterOfTheTarget() async throws {
        try await withTwoHosts(b: { _ in }, attempts: 2) { fixture, hostB in
            // B answers 503 with Retry-After: 3 once, then the image.
            let flaky = try viaA(fixture, to: "/flaky/ra.png?fail=1&status=503&retry_after=3", on: hostB)
            let first = Task { try await fixture.downloader.fetch(flaky, priority: .prefetch) }
            #expect(await eventually(timeout: .seconds(10)) { hostB.requestCount(prefix: "/flaky/ra.png") == 1 })
            let refusedAt = try #require(hostB.requests.first { $0.target.hasPrefix("/flaky/ra.png") }).arrivedAt
            // A request to A is not held back by B's Retry-After.
            _ = try await fixture.downloader.fetch(fixture.url("/img/a-direct.png"))
            let direct = try #require(fixture.server.requests.first { $0.target == "/img/a-direct.png" }).arrivedAt
            #expect(direct - refusedAt < .seconds(2), "A's request waited \(direct - refusedAt) for B's Retry-After")
            // Another of A's URLs redirecting to B: A answers at once, the hop waits for B.
            let next = try viaA(fixture, to: "/img/after.png", on: hostB)
            _ = try await fixture.downloader.fetch(next, priority: .prefetch)
            let redirected = try #require(fixture.server.requests.first { $0.target.hasPrefix("/redirect") && $0.target.contains("%2Fafter") }).arrivedAt
            #expect(redirected - refusedAt < .seconds(2), "A's redirect waited \(redirected - refusedAt) for B's Retry-After")
            let hop = try #require(hostB.requests.first { $0.target == "/img/after.png" }).arrivedAt
            #expect(hop - refusedAt >= .milliseconds(2_900), "the hop to B came \(hop - refusedAt) after its Retry-After of 3 s")
            let image = try await first.value
            #expect(image.download?.attempts == 2)
        }
    }
}
