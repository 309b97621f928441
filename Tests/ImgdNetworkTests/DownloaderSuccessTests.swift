import Foundation
import ImgdCore
import ImgdTestSupport
import Testing

@testable import ImgdNetwork

@Suite("Downloading into the cache", .timeLimit(.minutes(5)), .offThePool)
struct DownloaderSuccessTests {
    @Test("an image is downloaded, validated, published under its key, with its record")
    func downloadsAndRecords() async throws {
        try await withFixture { fixture in
        let target = "/img/first.png?w=40&h=30"
        let url = try fixture.url(target)
        let image = try await fixture.downloader.fetch(url)
        let expected = try #require(TestHTTPServer.body(for: target))

        #expect(image.source == .network)
        #expect(image.path == fixture.cacheRoot + "/" + url.cacheKey.relativePath)
        #expect(try Array(Data(contentsOf: URL(fileURLWithPath: image.path))) == expected)
        let record = try #require(image.download)
        #expect(record.status == 200)
        #expect(record.bytes == expected.count)
        #expect(record.sha256 == SHA256Digest(of: expected))
        #expect(record.image == ImageInfo(format: .png, width: 40, height: 30))
        #expect(record.contentType == "image/png")
        #expect(record.etag == "\"\(expected.count)-\(expected.last!)\"")
        #expect(record.lastModified == TestHTTPServer.imageLastModified)
        #expect(record.finalURL == url.normalized)
        #expect(record.attempts == 1)
        #expect(fixture.tempFiles.isEmpty)
        }
    }

    @Test("a body larger than the in-memory buffer streams through its temp file and is recorded exactly")
    func largeBody() async throws {
        try await withFixture { fixture in
        let target = "/img/large.png?bytes=1500000"
        let image = try await fixture.downloader.fetch(fixture.url(target))
        let expected = try #require(TestHTTPServer.body(for: target))
        #expect(image.bytes == expected.count)
        #expect(image.download?.sha256 == SHA256Digest(of: expected))
        #expect(try Array(Data(contentsOf: URL(fileURLWithPath: image.path))) == expected)
        #expect(fixture.tempFiles.isEmpty)
        }
    }

    @Test("a file already under the final name without a row (left by a crash) is replaced whole, through a temp file")
    func replacesOrphanFile() async throws {
        try await withFixture { fixture in
        let target = "/img/orphan.png?w=8&h=8"
        let url = try fixture.url(target)
        let path = fixture.cacheRoot + "/" + url.cacheKey.relativePath
        #expect(FileManager.default.createFile(atPath: path, contents: Data("half a body".utf8)))
        let image = try await fixture.downloader.fetch(url)
        #expect(image.source == .network)
        #expect(image.path == path)
        #expect(try Array(Data(contentsOf: URL(fileURLWithPath: path))) == TestHTTPServer.body(for: target))
        #expect(fixture.tempFiles.isEmpty)
        }
    }

    @Test("a cached URL is answered from disk without a request")
    func secondFetchComesFromDisk() async throws {
        try await withFixture { fixture in
        let url = try fixture.url("/img/again.gif?w=3&h=2")
        _ = try await fixture.downloader.fetch(url)
        let again = try await fixture.downloader.fetch(url)
        #expect(again.source == .disk)
        #expect(fixture.server.requestCount("/img/again.gif?w=3&h=2") == 1)
        }
    }

    @Test("the cache key hashes the whole normalised URL, never the last path component")
    func sameFileNameDifferentPaths() async throws {
        try await withFixture { fixture in
        let first = try await fixture.downloader.fetch(fixture.url("/img/a.png?seed=1"))
        let second = try await fixture.downloader.fetch(fixture.url("/img/a.png?seed=2"))
        #expect(first.path != second.path)
        #expect(fixture.cachedFiles.count == 2)
        }
    }

    @Test("redirects are followed and the final URL is recorded")
    func followsRedirects() async throws {
        try await withFixture { fixture in
        let destination = fixture.server.url("/img/moved.jpg?w=7&h=9")
        let encoded = destination.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        let image = try await fixture.downloader.fetch(fixture.url("/redirect?to=\(encoded)"))
        #expect(image.download?.finalURL == destination)
        #expect(image.download?.image == ImageInfo(format: .jpeg, width: 7, height: 9))
        }
    }

    @Test(
        "a body labelled Content-Encoding: gzip is stored as sent: imgd never asks for, nor inflates, encodings",
        arguments: [nil, ["h2"], ["http/1.1"]])
    func noContentDecoding(tlsProtocols: [String]?) async throws {
        let certificates = try await TestCertificates.shared()
        let tls = tlsProtocols.map { TestHTTPServer.TLS(certificates.valid, protocols: $0) }
        let policy = DownloaderFixture.testPolicy { $0.caFile = certificates.caFile }
        try await withFixture(policy: policy, tls: tls) { fixture in
            let target = "/gzip-labelled/z.png?w=9&h=9"
            let image = try await fixture.downloader.fetch(fixture.url(target))
            #expect(try Array(Data(contentsOf: URL(fileURLWithPath: image.path))) == TestHTTPServer.body(for: "/img/z.png?w=9&h=9"))
            // Asks for none: the request the server received names no encoding it would accept,
            // neither for the body (Accept-Encoding) nor for the transfer (TE).
            let requests = fixture.server.requests.filter { $0.target == target }
            try #require(requests.count == 1)
            #expect(!requests[0].headers.isEmpty, "the server saw the request's header fields")
            #expect(requests[0].values(of: "User-Agent") == [fixture.downloader.policy.userAgent])
            #expect(requests[0].values(of: "Accept-Encoding").isEmpty, "\(requests[0].headers)")
            #expect(requests[0].values(of: "TE").isEmpty, "\(requests[0].headers)")
            #expect(fixture.server.http2Requests == (tlsProtocols == ["h2"] ? 1 : 0))
        }
    }

    @Test("a slow but steady body is not a stall")
    func slowBody() async throws {
        try await withFixture(policy: DownloaderFixture.testPolicy { $0.lowSpeedTime = .seconds(1); $0.lowSpeedLimit = 1000 }) { fixture in
        let image = try await fixture.downloader.fetch(fixture.url("/img/slow.png?w=40&h=40&slow_bps=20000"))
        #expect(image.bytes == TestHTTPServer.body(for: "/img/slow.png?w=40&h=40")?.count)
        }
    }

    @Test("sequential downloads from one host reuse one connection")
    func keepAlive() async throws {
        try await withFixture { fixture in
        for index in 0..<10 {
            _ = try await fixture.downloader.fetch(fixture.url("/img/k\(index).png"))
        }
        #expect(fixture.server.connectionsAccepted == 1)
        }
    }

    @Test("a body without Content-Length, chunked or close-delimited, is accepted when complete")
    func noContentLength() async throws {
        try await withFixture { fixture in
        let chunked = try await fixture.downloader.fetch(fixture.url("/img/c.png?w=50&h=50&chunked=1"))
        let closed = try await fixture.downloader.fetch(fixture.url("/img/d.png?w=50&h=50&no_cl=1"))
        #expect(chunked.bytes == TestHTTPServer.body(for: "/img/c.png?w=50&h=50&chunked=1")?.count)
        #expect(closed.bytes == TestHTTPServer.body(for: "/img/d.png?w=50&h=50&no_cl=1")?.count)
        }
    }
}
