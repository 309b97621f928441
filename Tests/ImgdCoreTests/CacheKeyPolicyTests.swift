import ImgdTestSupport
import Testing

@testable import ImgdCore

@Suite("Cache keys that leave out signatures (key-ignore-query)", .offThePool)
struct CacheKeyPolicyTests {
    private let s3 = CacheKeyPolicy(rules: [
        .init(hosts: try! HostPattern("*.s3.amazonaws.com"), ignoredQuery: ["X-Amz-*", "Expires", "Signature", "Key-Pair-Id"].map { try! QueryNamePattern($0) }),
        .init(hosts: try! HostPattern("exact.example.com"), ignoredQuery: [try! QueryNamePattern("sig")]),
    ])

    @Test("two URLs that differ only in their signature share one key; the rest of the query still counts")
    func signatureIgnored() throws {
        let first = try ImageURL("https://bucket.s3.amazonaws.com/p/1.png?w=200&X-Amz-Signature=aaa&X-Amz-Expires=60&Expires=1&Signature=x&Key-Pair-Id=k")
        let second = try ImageURL("https://bucket.s3.amazonaws.com/p/1.png?w=200&x-amz-signature=bbb&X-Amz-Expires=3600&Expires=2&Signature=y&Key-Pair-Id=k")
        #expect(s3.keyedURL(of: first) == "https://bucket.s3.amazonaws.com/p/1.png?w=200")
        #expect(s3.key(for: first) == s3.key(for: second))
        let otherWidth = try ImageURL("https://bucket.s3.amazonaws.com/p/1.png?w=300&X-Amz-Signature=aaa")
        #expect(s3.key(for: otherWidth) != s3.key(for: first))
        // All dropped: the `?` goes too, so the unsigned URL has the same key.
        let signedOnly = try ImageURL("https://bucket.s3.amazonaws.com:443/p/2.png?X-Amz-Signature=aaa")
        let unsigned = try ImageURL("https://bucket.s3.amazonaws.com/p/2.png")
        #expect(s3.key(for: signedOnly) == s3.key(for: unsigned))
        #expect(s3.key(for: unsigned) == unsigned.cacheKey)
    }

    @Test("a derivation names the rule, its patterns and the parameters it dropped, and gives the same key")
    func derivation() throws {
        let url = try ImageURL("https://bucket.s3.amazonaws.com/p/1.png?w=200&X-Amz-Signature=aaa&Expires=1&keep=1")
        let derived = s3.derivation(for: url)
        #expect(derived.key == s3.key(for: url))
        #expect(derived.keyedURL == "https://bucket.s3.amazonaws.com/p/1.png?w=200&keep=1")
        #expect(derived.hostPattern == "*.s3.amazonaws.com")
        #expect(derived.ignoredPatterns == ["X-Amz-*", "Expires", "Signature", "Key-Pair-Id"])
        #expect(derived.droppedParameters == ["X-Amz-Signature", "Expires"])
        let other = try ImageURL("https://other.example/a.png?sig=1")
        let elsewhere = s3.derivation(for: other)
        #expect(elsewhere.hostPattern == nil && elsewhere.droppedParameters.isEmpty && elsewhere.key == other.cacheKey)
    }

    @Test("other hosts, the bare domain of a wildcard, and names that merely contain a pattern keep the whole URL")
    func scope() throws {
        for text in [
            "https://other.example/p.png?X-Amz-Signature=1",
            "https://s3.amazonaws.com/p.png?X-Amz-Signature=1",
            "https://exact.example.com/p.png?signature=1&sig2=2&xsig=3",
            "https://sub.exact.example.com/p.png?sig=1",
        ] {
            let url = try ImageURL(text)
            #expect(s3.key(for: url) == url.cacheKey, "\(text)")
        }
        let exact = try ImageURL("https://exact.example.com:8443/p.png?a=1&sig=2&b&=4")
        #expect(s3.keyedURL(of: exact) == "https://exact.example.com:8443/p.png?a=1&b&=4")
    }

    @Test("the most specific pattern applies, whatever the order written")
    func specificity() throws {
        let policy = CacheKeyPolicy(rules: [
            .init(hosts: try HostPattern("*.example.com"), ignoredQuery: [try QueryNamePattern("a")]),
            .init(hosts: try HostPattern("*.cdn.example.com"), ignoredQuery: [try QueryNamePattern("b")]),
            .init(hosts: try HostPattern("x.cdn.example.com"), ignoredQuery: []),
        ])
        #expect(policy.keyedURL(of: try ImageURL("https://y.cdn.example.com/p?a=1&b=2")) == "https://y.cdn.example.com/p?a=1")
        #expect(policy.keyedURL(of: try ImageURL("https://www.example.com/p?a=1&b=2")) == "https://www.example.com/p?b=2")
        #expect(policy.keyedURL(of: try ImageURL("https://x.cdn.example.com/p?a=1&b=2")) == "https://x.cdn.example.com/p?a=1&b=2")
    }

    @Test("patterns: * anywhere, ASCII case ignored; bad patterns say why")
    func patterns() throws {
        #expect(try QueryNamePattern("X-Amz-*").matches(Array("x-amz-credential".utf8)))
        #expect(try QueryNamePattern("*-Sig*ure").matches(Array("AWS-Signature".utf8)))
        #expect(try !QueryNamePattern("*-Sig*ure").matches(Array("AWS-Sigure2".utf8)))
        #expect(try QueryNamePattern("a*a").matches(Array("aa".utf8)))
        #expect(try !QueryNamePattern("a*a").matches(Array("a".utf8)))
        #expect(try QueryNamePattern("*").matches(Array("anything".utf8)))
        #expect(throws: HostPatternError.self) { try QueryNamePattern("a=b") }
        #expect(throws: HostPatternError.self) { try QueryNamePattern("") }
        // A port is allowed (issue 27: a table for that port only); a bad one is refused.
        for bad in ["images.example.com:0", "images.example.com:65536", "images.example.com:", "images.example.com:x", "::1", "[::1]:", "a:b:c"] {
            #expect(throws: HostPatternError.self, "\(bad)") { try HostPattern(bad) }
        }
        #expect(throws: HostPatternError.self) { try HostPattern("a.*.example.com") }
        #expect(throws: HostPatternError.self) { try HostPattern("*.") }
        #expect(try HostPattern("[::1]").matches("[::1]"))
        #expect(try HostPattern("Images.Example.COM").matches("images.example.com"))
    }

    @Test("a pattern with a port names that port only; without one, every port; key-ignore-query follows the most specific")
    func ports() throws {
        let ported = try HostPattern("Images.Example.com:8443")
        #expect(ported.text == "images.example.com:8443" && ported.host == "images.example.com" && ported.port == 8443)
        #expect(ported.matches("images.example.com", port: 8443))
        #expect(!ported.matches("images.example.com", port: 443))
        #expect(!ported.matches("images.example.com", port: nil))
        #expect(try HostPattern("images.example.com:08443") == ported)
        let v6 = try HostPattern("[::1]:8443")
        #expect(v6.host == "[::1]" && v6.port == 8443 && v6.matches("[::1]", port: 8443))
        let wild = try HostPattern("*.example.com:8443")
        #expect(wild.matches("a.example.com", port: 8443) && !wild.matches("a.example.com", port: 443))
        #expect(try HostPattern("images.example.com").matches("images.example.com", port: 8443))
        #expect(ported.specificity > (try HostPattern("images.example.com")).specificity)

        let policy = CacheKeyPolicy(rules: [
            .init(hosts: try HostPattern("img.example.com"), ignoredQuery: [try QueryNamePattern("a")]),
            .init(hosts: try HostPattern("img.example.com:8443"), ignoredQuery: [try QueryNamePattern("b")]),
        ])
        #expect(policy.keyedURL(of: try ImageURL("https://img.example.com/x?a=1&b=2")) == "https://img.example.com/x?b=2")
        #expect(policy.keyedURL(of: try ImageURL("https://img.example.com:8443/x?a=1&b=2")) == "https://img.example.com:8443/x?a=1")
        #expect(policy.keyedURL(of: try ImageURL("https://img.example.com:9000/x?a=1&b=2")) == "https://img.example.com:9000/x?b=2")
    }

    @Test("a chosen key lives in a namespace of its own per owner: never a URL's key, never another uid's")
    func chosenKey() throws {
        let url = try ImageURL("https://a.example/1.png")
        // A chosen key spelled like a URL (or like its normalised form) does not name its entry.
        #expect(CacheKey(chosen: "https://a.example/1.png", owner: 0) != url.cacheKey)
        #expect(CacheKey(chosen: url.normalized, owner: 1000) != url.cacheKey)
        #expect(CacheKey(chosen: "https://a.example/1.png", owner: 0) != CacheKey(normalizedURL: "https://a.example/1.png"))
        // One owner's key is one entry; another owner's same text is another.
        #expect(CacheKey(chosen: "product-2", owner: 1000) == CacheKey(chosen: "product-2", owner: 1000))
        #expect(CacheKey(chosen: "product-2", owner: 1000) != CacheKey(chosen: "product-2", owner: 65534))
        // The uid ends at the first colon: (1, "0:x") is not (10, "x").
        #expect(CacheKey(chosen: "0:x", owner: 1) != CacheKey(chosen: "x", owner: 10))
        #expect(SHA256Digest(hex: String(repeating: "Ab", count: 32))?.hex == String(repeating: "ab", count: 32))
        #expect(SHA256Digest(hex: String(repeating: "g", count: 64)) == nil)
        #expect(SHA256Digest(hex: "ab") == nil)
    }
}
