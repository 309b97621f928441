import Foundation
import ImgdCore
import ImgdStore
import ImgdTestSupport
import Testing

@testable import ImgdNetwork

/// https as CDNs serve it: TLS with HTTP/2 chosen by ALPN, or HTTP/1.1; certificates that must
/// be refused; a private CA given by `caFile`.
@Suite("https and HTTP/2", .timeLimit(.minutes(5)), .offThePool)
struct TLSDownloadTests {
    /// The test policy, trusting the test CA.
    static func policy(
        certificates: TestCertificates, _ adjust: (inout DownloadPolicy) -> Void = { _ in }
    ) -> DownloadPolicy {
        DownloaderFixture.testPolicy {
            $0.caFile = certificates.caFile
            adjust(&$0)
        }
    }

    @Test("200 URLs on one host at the default caps all arrive byte-exact", arguments: [["h2", "http/1.1"], ["http/1.1"]])
    func manyOnOneHost(protocols: [String]) async throws {
        let certificates = try await TestCertificates.shared()
        let tls = TestHTTPServer.TLS(certificates.valid, protocols: protocols)
        try await withFixture(policy: Self.policy(certificates: certificates), tls: tls) { fixture in
            let targets = (0..<200).map { "/img/cdn-\($0).png?w=24&h=24" }
            let urls = try targets.map { try fixture.url($0) }
            #expect(urls[0].normalized.hasPrefix("https://"))
            let results = await prefetchAll(urls, with: fixture.downloader)
            for (target, url) in zip(targets, urls) {
                let image = try #require(try results[url.normalized]?.get(), "\(target) failed: \(String(describing: results[url.normalized]))")
                #expect(try Array(Data(contentsOf: URL(fileURLWithPath: image.path))) == TestHTTPServer.body(for: target))
            }
            let http2 = protocols.first == "h2"
            #expect(fixture.server.http2Requests == (http2 ? 200 : 0))
            if http2 {
                // Multiplexed: the per-host cap's 4 streams share a connection or two, not one each.
                #expect(fixture.server.connectionsAccepted <= 2, "\(fixture.server.connectionsAccepted) connections")
            }
        }
    }

    @Test("under a full cap, streams pause while the cache makes room and then finish: 16 images of 300 KB through a 2 MiB cap", arguments: [["h2", "http/1.1"], ["http/1.1"]])
    func roomUnderTheCap(protocols: [String]) async throws {
        let certificates = try await TestCertificates.shared()
        let tls = TestHTTPServer.TLS(certificates.valid, protocols: protocols)
        let policy = Self.policy(certificates: certificates) {
            $0.maxParallel = 8
            // Three streams at once: an undeclared body holds its space in 256 KiB steps, so three
            // hold at most 1.5 MiB, and room can always be made from what is stored.
            $0.maxPerHost = 3
        }
        try await withFixture(policy: policy, diskLimit: 2 << 20, tls: tls) { fixture in
            let targets = (0..<16).map { "/img/room-\($0).png?bytes=300000" + ($0 % 2 == 0 ? "" : "&no_cl=1") }
            let urls = try targets.map { try fixture.url($0) }
            let results = await prefetchAll(urls, with: fixture.downloader)
            for (target, url) in zip(targets, urls) {
                let image = try #require(try results[url.normalized]?.get(), "\(target) failed: \(String(describing: results[url.normalized]))")
                #expect(image.bytes == 300_000)
                // Later ones evict earlier ones; what is still cached is byte-exact.
                if fixture.disk.lookup(url.cacheKey) != nil {
                    #expect(try Array(Data(contentsOf: URL(fileURLWithPath: image.path))) == TestHTTPServer.body(for: target))
                }
            }
            #expect(fixture.downloader.statistics.roomRequests > 0, "no transfer ever waited for room")
            #expect(fixture.disk.budget.snapshot.stored <= 2 << 20 && fixture.disk.budget.snapshot.reserved == 0)
            #expect(fixture.server.http2Requests == (protocols.first == "h2" ? 16 : 0))
        }
    }

    @Test(
        "a large PNG damaged deep inside is corrupt, caught by the walk its spill lane made (declared length) or by reading it back (none); the same image whole then arrives",
        arguments: [["h2", "http/1.1"], ["http/1.1"]], ["", "&no_cl=1"])
    func damagedLargePNGThenWhole(protocols: [String], length: String) async throws {
        let certificates = try await TestCertificates.shared()
        let tls = TestHTTPServer.TLS(certificates.valid, protocols: protocols)
        try await withFixture(policy: Self.policy(certificates: certificates), tls: tls) { fixture in
            // 300 KB: spilled in 64 KiB pieces; the flipped bit lies in the fourth.
            let damaged = "/img/deep.png?bytes=300000&flip=200000" + length
            let error = try await fixture.failure(damaged)
            #expect(error?.code == "corrupt", "\(String(describing: error))")
            #expect(error?.message.contains("'pADd'") == true, "\(String(describing: error))")
            #expect(fixture.server.requestCount(damaged) == 1, "corrupt is not retried")
            let whole = "/img/deep.png?bytes=300000" + length
            let image = try await fixture.downloader.fetch(try fixture.url(whole))
            #expect(try Array(Data(contentsOf: URL(fileURLWithPath: image.path))) == TestHTTPServer.body(for: whole))
            #expect(fixture.tempFiles.isEmpty)
            #expect(fixture.server.http2Requests == (protocols.first == "h2" ? 2 : 0))
        }
    }

    @Test("the per-host cap holds for HTTP/2 streams on one connection")
    func perHostCapOnStreams() async throws {
        let certificates = try await TestCertificates.shared()
        let policy = Self.policy(certificates: certificates) {
            $0.maxParallel = 8
            $0.maxPerHost = 3
        }
        try await withFixture(policy: policy, tls: TestHTTPServer.TLS(certificates.valid)) { fixture in
            let urls = try (0..<30).map { try fixture.url("/img/capped-\($0).png?gate=cap") }
            async let results = prefetchAll(urls, with: fixture.downloader)
            #expect(await fixture.server.waitForInFlight(atLeast: 3, timeout: .seconds(20)))
            // The engine's own view once three streams are held: three run, the rest wait.
            #expect(await eventually(timeout: .seconds(10)) { fixture.downloader.statistics.queued == 27 })
            #expect(fixture.downloader.statistics.running == 3)
            fixture.server.openGate("cap")
            let outcomes = await results
            #expect(outcomes.values.allSatisfy { (try? $0.get()) != nil })
            #expect(fixture.server.maxInFlight == 3)
            #expect(fixture.server.http2Requests == 30)
        }
    }

    @Test("a certificate that must be refused gives tls and is not retried", arguments: ["untrusted", "wrong-host", "expired"])
    func refusedCertificate(kind: String) async throws {
        let certificates = try await TestCertificates.shared()
        let pair = switch kind {
        case "untrusted": certificates.untrusted
        case "wrong-host": certificates.wrongHost
        default: certificates.expired
        }
        let policy = Self.policy(certificates: certificates) { $0.retry.maxAttempts = 3 }
        try await withFixture(policy: policy, tls: TestHTTPServer.TLS(pair)) { fixture in
            let error = try await fixture.failure("/img/refused.png")
            #expect(error?.code == "tls", "\(String(describing: error))")
            let statistics = fixture.downloader.statistics
            #expect(statistics.started == 1 && statistics.retries == 0, "a certificate problem is final")
            #expect(fixture.server.totalRequests == 0, "no request crossed a refused handshake")
        }
    }

    @Test("without caFile the system trust store is used: the test CA is not in it")
    func systemStoreByDefault() async throws {
        let certificates = try await TestCertificates.shared()
        let policy = DownloaderFixture.testPolicy { $0.retry.maxAttempts = 1 }
        try await withFixture(policy: policy, tls: TestHTTPServer.TLS(certificates.valid)) { fixture in
            let error = try await fixture.failure("/img/private.png")
            #expect(error?.code == "tls")
            // The same engine with the CA given (a reload) trusts it.
            fixture.downloader.update(policy: Self.policy(certificates: certificates))
            fixture.downloader.forgetFailures()
            let image = try await fixture.downloader.fetch(fixture.url("/img/private.png"))
            #expect(image.source == .network)
        }
    }

    @Test("a redirect from https to http is followed")
    func redirectToPlainHTTP() async throws {
        let certificates = try await TestCertificates.shared()
        let plain = try await TestHTTPServer.start()
        defer { Task { try? await plain.shutdown() } }
        try await withFixture(policy: Self.policy(certificates: certificates), tls: TestHTTPServer.TLS(certificates.valid)) { fixture in
            let target = plain.url("/img/downgraded.png?w=8&h=8")
            let image = try await fixture.downloader.fetch(
                fixture.url("/redirect?to=" + target.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!))
            #expect(try Array(Data(contentsOf: URL(fileURLWithPath: image.path))) == TestHTTPServer.body(for: "/img/downgraded.png?w=8&h=8"))
            #expect(plain.requestCount("/img/downgraded.png?w=8&h=8") == 1)
        }
        try await plain.shutdown()
    }
}

/// Prefetches `urls` and waits (up to two minutes) for every answer: the outcome by normalized URL.
func prefetchAll(_ urls: [ImageURL], with downloader: Downloader) async -> [String: Result<CachedImage, DownloadError>] {
    let answers = DownloaderPrefetchTests.Answers()
    downloader.prefetch(urls, submitter: downloader.makeSubmitter()) { answers.record($0, $1) }
    _ = await eventually(timeout: .seconds(120)) { answers.count >= urls.count }
    return Dictionary(answers.all, uniquingKeysWith: { first, _ in first })
}
