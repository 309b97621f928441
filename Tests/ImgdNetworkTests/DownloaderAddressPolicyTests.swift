import Foundation
import ImgdCore
import ImgdStore
import ImgdTestSupport
import Testing

@testable import ImgdNetwork

/// The address policy through the real downloader and a real server: with a proxy (the test
/// server plays it: a proxied request names the whole URL, and it serves any host by path) a URL
/// or redirect whose host is a literal address in a denied range is refused before the proxy
/// hears of it; without one, `0.0.0.0`, `::` and the other spellings of loopback are refused
/// wherever loopback is, though they reach a listener when allowed.
@Suite("Address policy: proxies, redirects and spellings of this host", .timeLimit(.minutes(5)), .offThePool)
struct DownloaderAddressPolicyTests {
    /// One attempt: a refusal must not be retried anyway, and a wrong success shows at once.
    static func policy(proxy: TestHTTPServer? = nil, _ adjust: (inout DownloadPolicy) -> Void = { _ in }) -> DownloadPolicy {
        DownloaderFixture.testPolicy {
            $0.retry.maxAttempts = 1
            $0.proxy = proxy?.origin
            adjust(&$0)
        }
    }

    /// A name the proxy "resolves": the test server serves any host by its path.
    static let origin = "http://imgd-origin.invalid"

    /// Runs `body` with a downloader whose proxy is the fixture's own server.
    private func withProxy(_ body: (DownloaderFixture, TestHTTPServer) async throws -> Void) async throws {
        let proxy = try await TestHTTPServer.start()
        let fixture = try await DownloaderFixture(policy: Self.policy(proxy: proxy), server: proxy)
        do {
            try await body(fixture, proxy)
            try await fixture.close()
        } catch {
            try? await fixture.close()
            throw error
        }
    }

    /// After a refusal, an allowed URL through the same proxy still arrives: nothing of the
    /// refusal stays with the handle or the connection.
    private func expectProxyStillWorks(_ fixture: DownloaderFixture, _ proxy: TestHTTPServer, after earlier: Int) async throws {
        let target = "/img/after.png"
        let image = try await fixture.downloader.fetch(try ImageURL(Self.origin + target))
        #expect(try Array(Data(contentsOf: URL(fileURLWithPath: image.path))) == TestHTTPServer.body(for: target))
        #expect(proxy.requestLog.dropFirst(earlier) == [Self.origin + target], "the proxy got the request in absolute form")
    }

    @Test(
        "with a proxy, a URL whose host is a denied literal address is refused and the proxy hears nothing",
        arguments: [
            "http://169.254.169.254/latest/meta-data/iam.png",
            "https://169.254.169.254/latest/meta-data/iam.png",
            "http://169.254.169.254./latest/meta-data/iam.png",
            "http://2852039166/latest/meta-data/iam.png",
            "http://0xa9.0xfe.0xa9.0xfe/latest/meta-data/iam.png",
            "http://169.254.43518/latest/meta-data/iam.png",
            "http://[::ffff:169.254.169.254]/latest/meta-data/iam.png",
            "http://[::ffff:a9fe:a9fe]/latest/meta-data/iam.png",
            "http://[::169.254.169.254]/latest/meta-data/iam.png",
            "http://[64:ff9b::a9fe:a9fe]/latest/meta-data/iam.png",
            "http://[2002:a9fe:a9fe::1]/latest/meta-data/iam.png",
            "http://[fd00:ec2::254]/latest/meta-data/iam.png",
            "http://[fe80::1%25lo]/x.png",
            "http://100.100.100.200/latest/meta-data/iam.png",
            "http://0.0.0.0/x.png",
            "http://[::]/x.png",
        ])
    func proxiedLiteral(url: String) async throws {
        try await withProxy { fixture, proxy in
            let error = await fixture.failure(url: try ImageURL(url))
            guard case .policyDenied(let reason) = error else {
                Issue.record("expected policy_denied, got \(String(describing: error))")
                return
            }
            #expect(reason.hasPrefix("the URL's host "), "\(reason)")
            #expect(proxy.totalRequests == 0 && proxy.connectionsAccepted == 0, "the proxy saw \(proxy.requestLog)")
            #expect(fixture.downloader.statistics.started == 1, "one attempt, refused: \(fixture.downloader.statistics)")
            try await expectProxyStillWorks(fixture, proxy, after: 0)
        }
    }

    @Test(
        "a redirect to a denied literal address is refused before it is requested, through a proxy or not",
        arguments: [
            "http://169.254.169.254/latest/meta-data/iam.png",
            "https://169.254.169.254/latest/meta-data/iam.png",
            "http://[::ffff:169.254.169.254]/",
            "http://[64:ff9b::a9fe:a9fe]/latest",
            "http://2852039166/latest",
            "http://[fd00:ec2::254]/latest",
        ],
        [true, false])
    func redirect(to target: String, viaProxy: Bool) async throws {
        let redirect = "/redirect?to=" + target.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        let check: (DownloaderFixture, TestHTTPServer, String) async throws -> Void = { fixture, server, url in
            let error = await fixture.failure(url: try ImageURL(url))
            guard case .policyDenied(let reason) = error else {
                Issue.record("expected policy_denied, got \(String(describing: error))")
                return
            }
            #expect(reason.hasPrefix("the redirect to "), "\(reason)")
            // Only the redirecting request: no GET, no CONNECT for the target.
            #expect(server.requestLog == [url.hasPrefix(Self.origin) ? url : redirect], "the server saw \(server.requestLog)")
        }
        if viaProxy {
            try await withProxy { fixture, proxy in
                try await check(fixture, proxy, Self.origin + redirect)
                try await expectProxyStillWorks(fixture, proxy, after: 1)
            }
        } else {
            try await withFixture(policy: Self.policy()) { fixture in
                try await check(fixture, fixture.server, fixture.server.url(redirect))
            }
        }
    }

    @Test(
        "without a proxy, 0.0.0.0, :: and loopback's other spellings reach a listener, and are refused where loopback is",
        arguments: ["[::]", "0.0.0.0", "[::ffff:127.0.0.1]", "localhost"])
    func thisHost(host: String) async throws {
        // Bound to ::, the server answers on every local address of both families.
        let open = try await TestHTTPServer.start(host: "::")
        let allowed = try await DownloaderFixture(policy: Self.policy { $0.addresses = AddressPolicy(deniedRanges: [IPRange("192.0.2.0/24")!]) }, server: open)
        do {
            _ = try await allowed.downloader.fetch(try ImageURL("http://\(host):\(open.port)/img/reached.png"))
            #expect(open.requestLog == ["/img/reached.png"], "allowed, \(host) reaches the listener")
            try await allowed.close()
        } catch {
            try? await allowed.close()
            throw error
        }

        let guarded = try await TestHTTPServer.start(host: "::")
        let loopbackDenied = Self.policy { $0.addresses = AddressPolicy(deniedRanges: [IPRange("127.0.0.0/8")!, IPRange("::1")!]) }
        let refused = try await DownloaderFixture(policy: loopbackDenied, server: guarded)
        do {
            let error = await refused.failure(url: try ImageURL("http://\(host):\(guarded.port)/img/refused.png"))
            #expect(error?.code == "policy_denied", "\(String(describing: error))")
            #expect(guarded.connectionsAccepted == 0 && guarded.totalRequests == 0, "the listener saw \(guarded.requestLog)")
            try await refused.close()
        } catch {
            try? await refused.close()
            throw error
        }
    }
}
