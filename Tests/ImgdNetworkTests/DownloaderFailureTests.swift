import Foundation
import ImgdCore
import ImgdStore
import ImgdTestSupport
import Testing

@testable import ImgdNetwork

/// One test per failure class: each shows the error a user sees and that nothing was cached,
/// nothing was left in the temp folder, and an image fetched beside it is intact.
@Suite("Failure classes", .timeLimit(.minutes(5)), .offThePool)
struct DownloaderFailureTests {
    /// One attempt, so the class shows without retries (retries have their own tests).
    static let oneAttempt = DownloaderFixture.testPolicy { $0.retry.maxAttempts = 1 }

    /// Fetches `target` expecting a failure, then checks the cache is clean and still works.
    private func expectFailure(
        _ target: String, policy: DownloadPolicy = oneAttempt, sourceLocation: SourceLocation = #_sourceLocation,
        _ check: (DownloadError) -> Bool
    ) async throws {
        try await withFixture(policy: policy) { fixture in
            let good = try await fixture.downloader.fetch(fixture.url("/img/bystander.png"))
            let error = try await fixture.failure(target)
            #expect(error.map(check) == true, "unexpected error \(String(describing: error))", sourceLocation: sourceLocation)
            #expect(fixture.tempFiles.isEmpty, "temp files left: \(fixture.tempFiles)", sourceLocation: sourceLocation)
            #expect(fixture.cachedFiles == [good.key.relativePath], sourceLocation: sourceLocation)
            let bytes = try Array(Data(contentsOf: URL(fileURLWithPath: good.path)))
            #expect(bytes == TestHTTPServer.body(for: "/img/bystander.png"), sourceLocation: sourceLocation)
        }
    }

    @Test("dns: a name that does not resolve")
    func dns() async throws {
        try await withFixture(policy: Self.oneAttempt) { fixture in
            let error = await fixture.failure(url: try ImageURL("http://imgd-test.invalid/a.png"))
            #expect(error?.code == "dns")
        }
    }

    @Test("connect: nothing listens on the port")
    func connect() async throws {
        try await withFixture(policy: Self.oneAttempt) { fixture in
            // Bind a port, then close it, so it is known to be free.
            let port = try closedPort()
            let error = await fixture.failure(url: try ImageURL("http://127.0.0.1:\(port)/a.png"))
            #expect(error?.code == "connect")
        }
    }

    @Test("tls: https spoken to a plain-HTTP server")
    func tls() async throws {
        try await withFixture(policy: Self.oneAttempt) { fixture in
            let error = await fixture.failure(url: try ImageURL("https://127.0.0.1:\(fixture.server.port)/img/a.png"))
            #expect(error?.code == "tls")
        }
    }

    @Test("timeout: a body that stalls below the low-speed limit")
    func stall() async throws {
        let policy = DownloaderFixture.testPolicy {
            $0.retry.maxAttempts = 1
            $0.lowSpeedLimit = 1000
            $0.lowSpeedTime = .seconds(1)
        }
        try await expectFailure("/img/stall.png?w=100&h=100&stall_after=100", policy: policy) { $0.code == "timeout" }
    }

    @Test("timeout: the whole attempt takes longer than allowed")
    func totalTimeout() async throws {
        let policy = DownloaderFixture.testPolicy {
            $0.retry.maxAttempts = 1
            $0.totalTimeout = .milliseconds(500)
        }
        try await expectFailure("/img/late.png?delay_ms=3000", policy: policy) { $0.code == "timeout" }
    }

    @Test("http_<status>: 404, 410 and 500 keep their status", arguments: [404, 410, 500])
    func httpStatus(status: Int) async throws {
        try await expectFailure("/status/\(status)") { $0 == .http(status: status, retryAfter: nil) && $0.code == "http_\(status)" }
    }

    @Test("too_large: a declared Content-Length over the body cap")
    func declaredTooLarge() async throws {
        let policy = DownloaderFixture.testPolicy { $0.maxBodyBytes = 100_000 }
        try await expectFailure("/img/big.png?bytes=300000", policy: policy) { $0.code == "too_large" }
    }

    @Test("too_large: a body without Content-Length is counted as it streams")
    func streamedTooLarge() async throws {
        let policy = DownloaderFixture.testPolicy { $0.maxBodyBytes = 100_000 }
        try await withFixture(policy: policy) { fixture in
            let error = try await fixture.failure("/img/big.png?bytes=3000000&no_cl=1")
            #expect(error?.code == "too_large")
            // The transfer stopped near the cap instead of reading all 3 MB.
            #expect(fixture.tempFiles.isEmpty)
        }
    }

    @Test("too_large: a PNG declaring 100000×100000 pixels")
    func tooManyPixels() async throws {
        try await expectFailure("/huge.png") { error in
            guard case .tooLarge(let message) = error else { return false }
            return message.contains("100000×100000")
        }
    }

    @Test("not_image: an HTML page served with 200")
    func notImage() async throws {
        try await expectFailure("/html") { $0.code == "not_image" }
    }

    @Test("corrupt: a complete PNG whose image data fails its CRC-32, and it is not retried")
    func corrupt() async throws {
        // The default policy allows retries: the single request shows `corrupt` is final.
        try await withFixture { fixture in
            let error = try await fixture.failure("/corrupt.png")
            #expect(error?.code == "corrupt")
            #expect(error?.message.contains("'IDAT'") == true, "\(String(describing: error))")
            #expect(fixture.server.requestCount("/corrupt.png") == 1)
            #expect(fixture.tempFiles.isEmpty)
            #expect(fixture.cachedFiles.isEmpty)
        }
    }

    @Test(
        "truncated: the connection closes mid-body, or Content-Length lies",
        arguments: [
            "/img/t.png?w=64&h=64&close_after=500",
            "/img/t.png?w=64&h=64&cl=%2B10",
            "/img/t.png?w=64&h=64&cl=-10",
            "/img/t.jpg?w=64&h=64&bytes=5000&no_cl=1&close_after=1000",
            // Past the in-memory buffer, so written by a spill lane: cut by the connection with a
            // declared length, and, without one, found short by the check of the whole file.
            "/img/big.png?w=64&h=64&bytes=300000&close_after=200000",
            "/img/big.jpg?w=64&h=64&bytes=500000&no_cl=1&close_after=300000",
        ])
    func truncated(target: String) async throws {
        try await expectFailure(target) { $0.code == "truncated" }
    }

    @Test("policy_denied: a redirect to file://")
    func redirectToFile() async throws {
        let target = "/redirect?to=" + "file:///etc/passwd".addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        try await expectFailure(target) { $0.code == "policy_denied" }
    }

    @Test("policy_denied: a redirect to a metadata address is refused at connect time")
    func redirectToDeniedAddress() async throws {
        let target = "/redirect?to=" + "http://169.254.169.254/latest/meta-data".addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        try await expectFailure(target) { error in
            guard case .policyDenied(let message) = error else { return false }
            return message.contains("169.254.169.254") && message.contains("169.254.0.0/16")
        }
    }

    @Test("policy_denied: a denied range covers the URL's own address, and is not retried")
    func deniedLoopback() async throws {
        var policy = DownloaderFixture.testPolicy()
        policy.addresses = AddressPolicy(deniedRanges: [IPRange("127.0.0.0/8")!])
        try await withFixture(policy: policy) { fixture in
            let error = try await fixture.failure("/img/a.png")
            #expect(error?.code == "policy_denied")
            #expect(fixture.server.totalRequests == 0)
            #expect(fixture.downloader.statistics.started == 1, "a refusal is final: no second attempt")
        }
    }

    @Test("too_many_redirects: a redirect loop")
    func redirectLoop() async throws {
        try await withFixture(policy: Self.oneAttempt) { fixture in
            let error = try await fixture.failure("/loop/0")
            #expect(error == .tooManyRedirects(limit: 5))
            #expect(fixture.server.requestCount(prefix: "/loop/") == 6)
        }
    }

    @Test("disk: a full filesystem evicts, retries once, then fails the URL; nothing cached is damaged", .enabled(if: TmpfsMount.isAvailable))
    func diskFull() async throws {
        let mount = try TmpfsMount(bytes: 768 * 1024)
        defer { mount.unmount() }
        let server = try await TestHTTPServer.start()
        let disk = try DiskCache(root: mount.path + "/cache")
        let cache = disk.directory
        let downloader = try Downloader(cache: disk, policy: Self.oneAttempt)
        let small = try ImageURL(server.url("/img/small.png?w=10&h=10"))
        let kept = try await downloader.fetch(small)
        let big = try ImageURL(server.url("/img/big.png?bytes=2000000"))
        do {
            _ = try await downloader.fetch(big)
            Issue.record("a 2 MB body cannot fit a 768 KiB filesystem")
        } catch {
            #expect(error.code == "disk")
            #expect(error.message.contains("No space left on device"))
        }
        #expect(server.requestCount("/img/big.png?bytes=2000000") == 2, "evicted, then tried once more")
        // Evicting to make room is allowed; serving a damaged file is not.
        if let entry = disk.lookup(kept.key) {
            #expect(try Array(Data(contentsOf: URL(fileURLWithPath: entry.path))) == TestHTTPServer.body(for: "/img/small.png?w=10&h=10"))
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: cache.tempFolder).isEmpty)
        // Space is free again: the next download works.
        let after = try await downloader.fetch(ImageURL(server.url("/img/after.png?w=10&h=10")))
        #expect(after.source == .network)
        await downloader.shutdown()
        try disk.close()
        try await server.shutdown()
    }

    @Test("disk: a filesystem smaller than the cap keeps taking images by evicting on ENOSPC", .enabled(if: TmpfsMount.isAvailable))
    func fillsSmallFilesystem() async throws {
        let mount = try TmpfsMount(bytes: 1024 * 1024)
        defer { mount.unmount() }
        let server = try await TestHTTPServer.start()
        let disk = try DiskCache(root: mount.path + "/cache")  // 1 GiB cap on a 1 MiB filesystem
        let downloader = try Downloader(cache: disk, policy: Self.oneAttempt)
        var last: CachedImage?
        for index in 0..<12 {
            last = try await downloader.fetch(ImageURL(server.url("/img/fill\(index).png?bytes=200000")))
        }
        let final = try #require(last)
        #expect(disk.lookup(final.key) != nil)
        #expect(try Array(Data(contentsOf: URL(fileURLWithPath: final.path))) == TestHTTPServer.body(for: "/img/fill11.png?bytes=200000"))
        #expect(try disk.index.totals().entries < 12, "older entries were evicted to make room")
        await downloader.shutdown()
        try disk.close()
        try await server.shutdown()
    }
}

/// A port on 127.0.0.1 that nothing listens on (bound, then released).
func closedPort() throws -> Int {
    try NginxTier.freePort()
}

