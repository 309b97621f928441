import Foundation
import ImgdCore
import ImgdTestSupport
import Testing

@testable import ImgdNetwork

/// The retry rules of docs/usage.md's "Failure classes", at the default number of attempts: each class
/// is fetched once, and the server (or the downloader's own count of attempts, where no request
/// can reach a server) shows how many times it was tried. Back-off is short (the fixture's), the
/// attempt count is the default.
@Suite("Retry rules at the default attempts", .timeLimit(.minutes(5)), .offThePool)
struct RetryRuleTests {
    /// The fixture's policy: default attempts, 10–50 ms back-off.
    static let policy = DownloaderFixture.testPolicy()
    /// Attempts per URL by default, the first included.
    static let attempts = RetryPolicy().maxAttempts

    @Test("the default is three attempts, and the tests here use it")
    func defaultAttempts() {
        #expect(Self.attempts == 3)
        #expect(Self.policy.retry.maxAttempts == Self.attempts)
    }

    @Test("dns is never retried: one attempt")
    func dns() async throws {
        try await withFixture(policy: Self.policy) { fixture in
            let error = await fixture.failure(url: try ImageURL("http://imgd-test.invalid/a.png"))
            #expect(error?.code == "dns")
            #expect(fixture.downloader.statistics.started == 1)
            #expect(fixture.downloader.statistics.retries == 0)
        }
    }

    @Test("tls is never retried: one connection, no request")
    func tls() async throws {
        try await withFixture(policy: Self.policy) { fixture in
            let error = await fixture.failure(url: try ImageURL("https://127.0.0.1:\(fixture.server.port)/img/a.png"))
            #expect(error?.code == "tls")
            #expect(fixture.server.connectionsAccepted == 1)
            #expect(fixture.server.totalRequests == 0, "a TLS hello is not an HTTP request")
            #expect(fixture.downloader.statistics.started == 1)
            #expect(fixture.downloader.statistics.retries == 0)
        }
    }

    @Test(
        "too_large is never retried: one request (declared length, streamed body, declared pixels)",
        arguments: ["/img/big.png?bytes=300000", "/img/big.png?bytes=3000000&no_cl=1", "/huge.png"])
    func tooLarge(target: String) async throws {
        let policy = DownloaderFixture.testPolicy { $0.maxBodyBytes = 100_000 }
        #expect(policy.retry.maxAttempts == Self.attempts)
        try await withFixture(policy: policy) { fixture in
            let error = try await fixture.failure(target)
            #expect(error?.code == "too_large")
            #expect(fixture.server.requestCount(target) == 1)
            #expect(fixture.downloader.statistics.retries == 0)
        }
    }

    @Test("HTTP 408, 425, 429, 500, 502, 503, 504 are retried up to the default attempts", arguments: [408, 425, 429, 500, 502, 503, 504])
    func retriedStatuses(status: Int) async throws {
        try await withFixture(policy: Self.policy) { fixture in
            let target = "/status/\(status)"
            let error = try await fixture.failure(target)
            #expect(error?.code == "http_\(status)")
            #expect(fixture.server.requestCount(target) == Self.attempts)
            #expect(fixture.downloader.statistics.retries == Self.attempts - 1)
        }
    }

    @Test("a retried status that then succeeds is cached after the failures", arguments: [408, 425, 502, 504])
    func retriedThenCached(status: Int) async throws {
        try await withFixture(policy: Self.policy) { fixture in
            let target = "/flaky/s\(status).png?fail=\(Self.attempts - 1)&status=\(status)"
            let image = try await fixture.downloader.fetch(fixture.url(target))
            #expect(image.download?.attempts == Self.attempts)
            #expect(fixture.server.requestCount(target) == Self.attempts)
        }
    }

    @Test("other statuses are final: one request", arguments: [400, 401, 403, 404, 410, 501])
    func finalStatuses(status: Int) async throws {
        try await withFixture(policy: Self.policy) { fixture in
            let target = "/status/\(status)"
            let error = try await fixture.failure(target)
            #expect(error?.code == "http_\(status)")
            #expect(fixture.server.requestCount(target) == 1)
        }
    }

    @Test(
        "network: a connection closed or reset before any response, retried up to the default attempts",
        arguments: ["close", "reset"])
    func network(hangUp: String) async throws {
        try await withFixture(policy: Self.policy) { fixture in
            let target = "/img/n.png?hangup=\(hangUp)"
            let error = try await fixture.failure(target)
            #expect(error?.code == "network", "\(String(describing: error))")
            #expect(fixture.server.requestCount(target) == Self.attempts)
            #expect(fixture.downloader.statistics.retries == Self.attempts - 1)
        }
    }

    @Test("connect: a refused connection is retried up to the default attempts")
    func connect() async throws {
        try await withFixture(policy: Self.policy) { fixture in
            let port = try closedPort()
            let error = await fixture.failure(url: try ImageURL("http://127.0.0.1:\(port)/a.png"))
            #expect(error?.code == "connect")
            #expect(fixture.downloader.statistics.started == Self.attempts)
        }
    }

    @Test("truncated: a body cut by the connection is retried up to the default attempts")
    func truncated() async throws {
        try await withFixture(policy: Self.policy) { fixture in
            let target = "/img/t.png?w=64&h=64&close_after=100"
            let error = try await fixture.failure(target)
            #expect(error?.code == "truncated")
            #expect(fixture.server.requestCount(target) == Self.attempts)
        }
    }
}
