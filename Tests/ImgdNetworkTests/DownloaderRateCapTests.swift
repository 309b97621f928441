import Foundation
import ImgdCore
import ImgdTestSupport
import Testing

@testable import ImgdNetwork

/// `max-rate` in the engine, through real libcurl against the test server: what the cap must not
/// break — the stall and pace limits, HTTP/2 streams sharing a connection, a transfer ending
/// while it is held back.
@Suite("max-rate in the downloader", .serialized, .timeLimit(.minutes(5)), .offThePool)
struct DownloaderRateCapTests {
    /// A policy whose limits are strict and quick to trip: under 16 KiB/s for 2 s is a stall, and
    /// an attempt has 3 s.
    static func strictStallPolicy(maxRate: Int?) -> DownloadPolicy {
        DownloaderFixture.testPolicy {
            $0.retry.maxAttempts = 1
            $0.lowSpeedLimit = 16_384
            $0.lowSpeedTime = .seconds(2)
            $0.totalTimeout = .seconds(3)
            $0.maxRate = maxRate
        }
    }

    @Test("a cap giving each transfer less than the stall limit, for longer than an attempt's time: none fails, while a slow origin without a cap does, and a stalled origin under the cap still does")
    func lowCapIsNoStall() async throws {
        try await withFixture(policy: Self.strictStallPolicy(maxRate: nil)) { fixture in
            // The limit is live: an origin at 4 KiB/s, no cap, fails as stalled.
            let slow = await fixture.failure(url: try fixture.url("/img/slow.png?bytes=40000&slow_bps=4096"))
            guard case .timeout = slow else {
                Issue.record("a 4 KiB/s origin under a 16 KiB/s stall limit did not time out: \(String(describing: slow))")
                return
            }
        }
        // 32 KiB/s shared by four transfers at once (max-per-host): 8 KiB/s each, half the stall
        // limit, for about 5 s each (past the attempt's 3 s) and 7 s in all. Another URL stalls
        // for real after 5,000 bytes.
        try await withFixture(policy: Self.strictStallPolicy(maxRate: 32_768)) { fixture in
            let targets = (0..<6).map { "/img/capped-\($0).png?bytes=40000" } + ["/img/stalled.png?bytes=40000&stall_after=5000"]
            let urls = try targets.map(fixture.url)
            let started = ContinuousClock.now
            let results = await prefetchAll(urls, with: fixture.downloader)
            let elapsed = ContinuousClock.now - started
            for url in urls.dropLast() {
                #expect((try? results[url.normalized]?.get()) != nil, "\(url.normalized): \(String(describing: results[url.normalized]))")
            }
            guard case .failure(.timeout) = results[urls.last!.normalized] else {
                Issue.record("the stalled origin did not fail as a timeout: \(String(describing: results[urls.last!.normalized]))")
                return
            }
            let statistics = fixture.downloader.statistics
            #expect(statistics.throttled > 0, "\(statistics)")
            #expect(statistics.pacedOut == 0, "\(statistics)")
            // 245,000 bytes at 32 KiB/s, less the burst (a quarter of a second) and one 16 KiB
            // offer per transfer: at least 5.2 s if the cap held.
            #expect(elapsed > .seconds(5), "\(elapsed)")
        }
    }

    @Test("a transfer cancelled while held back frees its share: the next one runs at the whole cap", arguments: [false, true])
    func endedWhilePaused(byFailure: Bool) async throws {
        let policy = DownloaderFixture.testPolicy {
            $0.retry.maxAttempts = 1
            $0.maxRate = 1_000_000
        }
        try await withFixture(policy: policy) { fixture in
            // At 1 MB/s the transfer is held back within its first quarter of a second, and then
            // again each time it has used the tokens that came back: it is paused most of the
            // time, for seconds (3 MB before the origin closes; 40 MB, cancelled once seen held).
            // Held back is watched through the count of pauses, which only grows: the number
            // paused now falls to 0 between two pauses, and a poller starved for as long as the
            // transfer lasts would miss it.
            let first = try fixture.url(byFailure ? "/img/first.png?bytes=4000000&close_after=3000000" : "/img/first.png?bytes=40000000")
            let answers = DownloaderPrefetchTests.Answers()
            fixture.downloader.prefetch([first], submitter: fixture.downloader.makeSubmitter()) { answers.record($0, $1) }
            #expect(await eventually(timeout: .seconds(20)) { fixture.downloader.statistics.throttled >= 1 })
            if byFailure {
                // The origin closed after 3 MB; libcurl finds it when the bucket lets it read.
                #expect(await eventually(timeout: .seconds(20)) { answers.count == 1 })
                guard case .failure = answers.all.first?.1 else {
                    Issue.record("a body cut short succeeded: \(answers.all)")
                    return
                }
            } else {
                fixture.downloader.cancel(url: first)
                #expect(await eventually(timeout: .seconds(10)) { answers.count == 1 })
                // 40 s at the cap: a transfer that ended on its own would make this test prove nothing.
                guard case .failure(.cancelled) = answers.all.first?.1 else {
                    Issue.record("the 40 MB transfer was not cancelled while held back: \(answers.all)")
                    return
                }
            }
            #expect(await eventually(timeout: .seconds(10)) { fixture.downloader.statistics.throttledNow == 0 })
            let started = ContinuousClock.now
            let next = try await fixture.downloader.fetch(try fixture.url("/img/next.png?bytes=2000000"), priority: .prefetch)
            let elapsed = ContinuousClock.now - started
            #expect(next.bytes > 1_990_000)
            // 2 MB at 1 MB/s, less the burst: the whole cap, nothing held for the ended transfer.
            #expect(elapsed > .milliseconds(1600) && elapsed < .milliseconds(3500) * Sanitizer.slowdown, "\(elapsed)")
        }
    }

    @Test("HTTP/2: streams held back on one connection share the cap, and an exempt get on that connection is not held behind them")
    func http2Streams() async throws {
        let certificates = try await TestCertificates.shared()
        let policy = TLSDownloadTests.policy(certificates: certificates) {
            $0.retry.maxAttempts = 1
            $0.maxRate = 500_000
            // Room for the get beside the four prefetches: it preempts none (a preempted stream
            // would be requested again).
            $0.maxPerHost = 8
        }
        try await withFixture(policy: policy, tls: TestHTTPServer.TLS(certificates.valid)) { fixture in
            // One fetch first: libcurl then knows the host speaks h2 and multiplexes the rest.
            _ = try await fixture.downloader.fetch(try fixture.url("/img/h2-first.png"))
            let urls = try (0..<4).map { try fixture.url("/img/h2-\($0).png?bytes=1000000") }
            let answers = DownloaderPrefetchTests.Answers()
            // Pauses only add up (how many are paused *now* rises and falls at every refill, and a
            // poller can miss it): two more than before, and the prefetch is being held back.
            let pausedBefore = fixture.downloader.statistics.throttled
            let started = ContinuousClock.now
            fixture.downloader.prefetch(urls, submitter: fixture.downloader.makeSubmitter()) { answers.record($0, $1) }
            #expect(await eventually(timeout: .seconds(20)) { fixture.downloader.statistics.throttled >= pausedBefore + 2 })
            // An on-demand get is exempt under the default scope: 8 MB over the same connection
            // while the prefetch streams are paused. At the cap it would take at least 15.75 s.
            let getStarted = ContinuousClock.now
            let got = try await fixture.downloader.fetch(try fixture.url("/img/h2-now.png?bytes=8000000"))
            let getTook = ContinuousClock.now - getStarted
            #expect(got.bytes > 7_990_000)
            #expect(getTook < .seconds(6) * Sanitizer.slowdown, "the exempt get took \(getTook): held behind the paused streams")
            #expect(answers.count < 4, "the prefetch finished before the get: the test proves nothing")
            #expect(await eventually(timeout: .seconds(30)) { answers.count == 4 })
            let elapsed = ContinuousClock.now - started
            for (url, result) in answers.all {
                #expect((try? result.get()) != nil, "\(url): \(result)")
            }
            // 4 MB at 500 KB/s, the get's 8 MB not counted: at least 7.75 s (the burst aside).
            #expect(elapsed > .milliseconds(7600) && elapsed < .seconds(14) * Sanitizer.slowdown, "\(elapsed)")
            #expect(fixture.server.http2Requests == 6)
            #expect(fixture.server.connectionsAccepted == 1, "\(fixture.server.connectionsAccepted) connections: not one multiplexed")
        }
    }

    @Test("a new cap applies at once to running transfers: lifted, the rest of a held-back body arrives at once")
    func reloadLiftsCap() async throws {
        let policy = DownloaderFixture.testPolicy { $0.maxRate = 500_000 }
        try await withFixture(policy: policy) { fixture in
            let url = try fixture.url("/img/long.png?bytes=5000000")
            let answers = DownloaderPrefetchTests.Answers()
            let started = ContinuousClock.now
            fixture.downloader.prefetch([url], submitter: fixture.downloader.makeSubmitter()) { answers.record($0, $1) }
            #expect(await eventually(timeout: .seconds(20)) { fixture.downloader.statistics.throttled >= 5 })
            #expect(answers.count == 0)
            var lifted = policy
            lifted.maxRate = nil
            fixture.downloader.update(policy: lifted)
            let liftedAt = ContinuousClock.now
            #expect(await eventually(timeout: .seconds(10)) { answers.count == 1 })
            #expect((try? answers.all.first?.1.get()) != nil, "\(answers.all)")
            // 10 s at the old cap; about 1 s had passed.
            #expect(ContinuousClock.now - liftedAt < .seconds(3) * Sanitizer.slowdown, "\(ContinuousClock.now - liftedAt)")
            #expect(ContinuousClock.now - started < .seconds(6) * Sanitizer.slowdown)
        }
    }
}
