import Foundation
import ImgdCore
import ImgdStore
import ImgdTestSupport
import Testing

@testable import ImgdNetwork

/// A test's world: a fresh cache folder, a real test HTTP server on 127.0.0.1, and a downloader
/// with short timeouts and fast back-off. Torn down by ``close()``.
struct DownloaderFixture {
    let server: TestHTTPServer
    let cacheRoot: String
    let disk: DiskCache
    /// The cache folder (the disk tier's files).
    var cache: CacheDirectory { disk.directory }
    let downloader: Downloader

    /// A policy for tests: the defaults, with timeouts and back-off short enough for a test.
    static func testPolicy(_ adjust: (inout DownloadPolicy) -> Void = { _ in }) -> DownloadPolicy {
        var policy = DownloadPolicy()
        policy.connectTimeout = .seconds(2)
        // Longer than any gate a test holds on a loaded 2-core machine: a held request that timed
        // out would be retried and counted twice. The timeout tests set their own.
        policy.totalTimeout = .seconds(120)
        policy.lowSpeedTime = .seconds(120)
        policy.retry.baseDelay = .milliseconds(10)
        policy.retry.maxDelay = .milliseconds(50)
        adjust(&policy)
        return policy
    }

    init(
        policy: DownloadPolicy = DownloaderFixture.testPolicy(), diskLimit: Int = DiskCache.defaultLimit,
        server: TestHTTPServer? = nil
    ) async throws {
        if let server { self.server = server } else { self.server = try await TestHTTPServer.start() }
        cacheRoot = try ScratchFolder("imgd-test").path("cache")
        disk = try DiskCache(root: cacheRoot, limit: diskLimit)
        downloader = try Downloader(cache: disk, policy: policy)
    }

    func url(_ pathAndQuery: String) throws -> ImageURL { try ImageURL(server.url(pathAndQuery)) }

    /// Fetches and returns the error, failing the test if the fetch succeeded.
    func failure(
        _ pathAndQuery: String, priority: FetchPriority = .onDemand, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> DownloadError? {
        try await failure(url: url(pathAndQuery), sourceLocation: sourceLocation)
    }

    func failure(url: ImageURL, sourceLocation: SourceLocation = #_sourceLocation) async -> DownloadError? {
        do {
            let image = try await downloader.fetch(url)
            Issue.record("expected a failure, got \(image.path)", sourceLocation: sourceLocation)
            return nil
        } catch {
            #expect(cache.existingSize(of: url.cacheKey) == nil, "a failed URL must leave no cached file", sourceLocation: sourceLocation)
            #expect(disk.lookup(url.cacheKey) == nil, "nor an index row", sourceLocation: sourceLocation)
            return error
        }
    }

    /// Files in the temp folder: must be none once transfers are over.
    var tempFiles: [String] { (try? FileManager.default.contentsOfDirectory(atPath: cache.tempFolder)) ?? [] }

    /// Every cached file (relative paths), temp folder excluded.
    var cachedFiles: [String] {
        let enumerator = FileManager.default.enumerator(atPath: cacheRoot)
        var files: [String] = []
        while let path = enumerator?.nextObject() as? String {
            // Image files are in the fan-out folders; the root's own files (index, lock, layout
            // marker) and tmp/ are not images.
            guard path.contains("/"), !path.hasPrefix("tmp/") else { continue }
            var isFolder: ObjCBool = false
            if FileManager.default.fileExists(atPath: cacheRoot + "/" + path, isDirectory: &isFolder), !isFolder.boolValue {
                files.append(path)
            }
        }
        return files
    }

    func close() async throws {
        await downloader.shutdown()
        try disk.close()
        try await server.shutdown()
        try? FileManager.default.removeItem(atPath: cacheRoot)
    }
}


/// Runs `body` with a fresh fixture and always tears it down, whether `body` passes or throws.
/// The fixture's server is started here (with `tls`), or is `server` when one is given (which
/// the fixture then shuts down).
func withFixture<T>(
    policy: DownloadPolicy = DownloaderFixture.testPolicy(), diskLimit: Int = DiskCache.defaultLimit,
    tls: TestHTTPServer.TLS? = nil, server given: TestHTTPServer? = nil, _ body: (DownloaderFixture) async throws -> T
) async throws -> T {
    let server: TestHTTPServer
    if let given { server = given } else { server = try await TestHTTPServer.start(tls: tls) }
    let fixture: DownloaderFixture
    do {
        fixture = try await DownloaderFixture(policy: policy, diskLimit: diskLimit, server: server)
    } catch {
        try? await server.shutdown()
        throw error
    }
    do {
        let result = try await body(fixture)
        try await fixture.close()
        return result
    } catch {
        try? await fixture.close()
        throw error
    }
}
