import ImgdCore
import ImgdTestSupport
import Testing

@Suite("URLs and cache keys", .offThePool)
struct ImageURLTests {
    @Test(
        "normalisation lower-cases scheme and host, drops default port and fragment, keeps path and query",
        arguments: [
            ("HTTP://Example.COM:80/A/B.png?X=1#frag", "http://example.com/A/B.png?X=1"),
            ("https://example.com:443/a.png", "https://example.com/a.png"),
            ("https://example.com:8443/a.png", "https://example.com:8443/a.png"),
            ("http://example.com", "http://example.com/"),
            ("http://[::1]:8080/x.gif", "http://[::1]:8080/x.gif"),
        ])
    func normalisation(input: String, expected: String) throws {
        #expect(try ImageURL(input).normalized == expected)
    }

    @Test("equal resources share a key; different paths with the same file name do not")
    func keys() throws {
        #expect(try ImageURL("HTTP://A.example/x/img.png#top").cacheKey == ImageURL("http://a.example:80/x/img.png").cacheKey)
        #expect(try ImageURL("http://a.example/x/img.png").cacheKey != ImageURL("http://a.example/y/img.png").cacheKey)
        #expect(try ImageURL("http://a.example/img.png?v=1").cacheKey != ImageURL("http://a.example/img.png?v=2").cacheKey)
        // The stored (normalised) form gives the same key without a parse.
        let stored = try ImageURL("HTTP://A.example:80/x/img.png#top")
        #expect(CacheKey(normalizedURL: stored.normalized) == stored.cacheKey)
    }

    @Test("the key is the SHA-256 of the normalised URL, laid out in a fan-out folder named by its first byte")
    func keyLayout() throws {
        let key = try ImageURL("http://example.com/").cacheKey
        // sha256("http://example.com/"), computed independently with sha256sum.
        #expect(key.hex == "2a1b402420ef46577471cdc7409b0fa2c6a204db316e59ade2d805435489a067")
        #expect(key.relativePath == "2a/2a1b402420ef46577471cdc7409b0fa2c6a204db316e59ade2d805435489a067")
        #expect(key.fanOutBucket == 0x2a)
        #expect(key.withRelativePath { String(cString: $0) } == key.relativePath)
    }

    @Test("host key includes the port, explicit or default")
    func hostKey() throws {
        #expect(try ImageURL("http://Example.com/a").hostKey == "example.com:80")
        #expect(try ImageURL("https://example.com/a").hostKey == "example.com:443")
        #expect(try ImageURL("http://127.0.0.1:8080/a").hostKey == "127.0.0.1:8080")
    }

    @Test(
        "bad URLs are rejected with a reason",
        arguments: [
            ("ftp://example.com/a.png", "scheme 'ftp'"),
            ("file:///etc/passwd", "scheme 'file'"),
            ("example.com/a.png", "not a valid URL"),
            ("http://exa mple.com/a.png", "space or control character"),
            ("", "empty URL"),
            ("http://", "not a valid URL"),
        ])
    func rejects(input: String, reason: String) {
        #expect {
            _ = try ImageURL(input)
        } throws: { error in
            "\(error)".contains(reason)
        }
    }

    @Test("a URL over the length limit is rejected")
    func tooLong() {
        let long = "http://example.com/" + String(repeating: "a", count: ImageURL.maximumLength)
        #expect(throws: ImageURLError.tooLong(length: long.utf8.count, limit: ImageURL.maximumLength)) { try ImageURL(long) }
    }
}
