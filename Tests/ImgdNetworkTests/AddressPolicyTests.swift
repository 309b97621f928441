import ImgdTestSupport
import Testing

@testable import ImgdNetwork

/// The address policy's reading of addresses: every IPv6 form that carries an IPv4 address is
/// checked as that address, `0.0.0.0` and `::` count as this host, and a URL's literal host is
/// parsed in every spelling libcurl or a proxy might accept.
@Suite("Address policy: normalised forms and literal hosts", .offThePool)
struct AddressPolicyTests {
    /// Parses a textual address, failing the test if it does not parse.
    private func parse(_ text: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> IPRange.Address {
        try #require(IPRange.Address(text), "\(text) does not parse", sourceLocation: sourceLocation)
    }

    /// Loopback denied, 0.0.0.0/8 not: what the `::` and `0.0.0.0` rule is for.
    static let loopbackDenied = AddressPolicy(deniedRanges: [IPRange("127.0.0.0/8")!, IPRange("::1")!])

    @Test(
        "an IPv4 address carried by an IPv6 form is checked as that address (defaults)",
        arguments: [
            ("::ffff:169.254.169.254", "169.254.0.0/16"),  // IPv4-mapped
            ("::ffff:a9fe:a9fe", "169.254.0.0/16"),
            ("::169.254.169.254", "169.254.0.0/16"),  // IPv4-compatible
            ("64:ff9b::169.254.169.254", "169.254.0.0/16"),  // NAT64
            ("64:ff9b::a9fe:a9fe", "169.254.0.0/16"),
            ("2002:a9fe:a9fe::", "169.254.0.0/16"),  // 6to4
            ("2002:a9fe:a9fe:1:2:3:4:5", "169.254.0.0/16"),
            ("2002:6464:64c8::1", "100.100.100.200/32"),
            ("64:ff9b::6464:64c8", "100.100.100.200/32"),
            ("::ffff:0.0.0.0", "0.0.0.0/8"),
            ("::0.0.0.2", "0.0.0.0/8"),
        ])
    func embeddedDenied(address: String, range: String) throws {
        let parsed = try #require(IPRange.Address(address))
        let refusal = try #require(AddressPolicy.default.refusal(of: parsed))
        #expect(refusal.range.description == range)
        #expect(AddressPolicy.default.denyingRange(for: parsed)?.description == range)
    }

    @Test("the refusal names the IPv4 address it found inside")
    func embeddedReason() throws {
        let refusal = try #require(AddressPolicy.default.refusal(of: try parse("64:ff9b::a9fe:a9fe")))
        #expect(refusal.match == .embeds(try parse("169.254.169.254")))
        #expect(refusal.description == "it stands for the IPv4 address 169.254.169.254, in the denied range 169.254.0.0/16")
    }

    @Test(
        "forms that carry an allowed IPv4 address, or none, stay allowed (defaults)",
        arguments: [
            "::1", "64:ff9b::a00:1", "2002:0a00:0001::", "::ffff:10.0.0.1", "::10.0.0.1", "64:ff9c::a9fe:a9fe",
            "2003:a9fe:a9fe::", "2001:db8::a9fe:a9fe", "64:ff9b:1::a9fe:a9fe", "::ffff:127.0.0.1",
        ])
    func embeddedAllowed(address: String) throws {
        let parsed = try #require(IPRange.Address(address))
        #expect(AddressPolicy.default.refusal(of: parsed) == nil)
    }

    @Test(
        "0.0.0.0 and :: reach loopback: refused wherever loopback is, in every spelling",
        arguments: ["::", "0.0.0.0", "::ffff:0.0.0.0", "64:ff9b::", "2002::", "::ffff:127.0.0.1", "::127.0.0.1", "64:ff9b::7f00:1", "2002:7f00:1::", "127.1.2.3", "::1"])
    func thisHost(address: String) throws {
        let parsed = try #require(IPRange.Address(address))
        #expect(Self.loopbackDenied.refusal(of: parsed) != nil)
    }

    @Test("either loopback range alone refuses both unspecified addresses")
    func thisHostEitherFamily() throws {
        for denied in ["127.0.0.0/8", "::1", "0.0.0.0/32", "::/128"] {
            let policy = AddressPolicy(deniedRanges: [try #require(IPRange(denied))])
            for address in ["::", "0.0.0.0"] {
                let refusal = policy.refusal(of: try parse(address))
                #expect(refusal?.range.description == denied, "\(address) with \(denied) denied")
            }
        }
        let refusal = Self.loopbackDenied.refusal(of: try parse("::"))
        #expect(refusal?.match == .meansThisHost)
        #expect(refusal?.description == "it means this host, and the denied range 127.0.0.0/8 holds this host's address")
    }

    @Test("the defaults refuse :: as they refuse 0.0.0.0, and allow loopback")
    func defaultsThisHost() throws {
        #expect(AddressPolicy.default.refusal(of: try parse("::")) != nil)
        #expect(AddressPolicy.default.refusal(of: try parse("::1")) == nil)
        #expect(AddressPolicy.default.refusal(of: try parse("127.0.0.1")) == nil)
    }

    @Test("nothing is refused by an empty list, not even ::")
    func emptyList() throws {
        let open = AddressPolicy(deniedRanges: [])
        for address in ["::", "0.0.0.0", "::ffff:169.254.169.254", "64:ff9b::a9fe:a9fe"] {
            #expect(open.refusal(of: try parse(address)) == nil)
        }
    }

    @Test(
        "a URL's literal host is read in every spelling",
        arguments: [
            ("169.254.169.254", "169.254.169.254"),
            ("169.254.169.254.", "169.254.169.254"),
            ("2852039166", "169.254.169.254"),
            ("0xa9fea9fe", "169.254.169.254"),
            ("0xa9.0xfe.0xa9.0xfe", "169.254.169.254"),
            ("0251.0376.0251.0376", "169.254.169.254"),
            ("169.254.43518", "169.254.169.254"),
            ("127.1", "127.0.0.1"),
            ("[::ffff:169.254.169.254]", "169.254.169.254"),
            ("[::FFFF:A9FE:A9FE]", "169.254.169.254"),
            ("[fe80::1%eth0]", "fe80::1"),
            ("[fe80::1%25eth0]", "fe80::1"),
            ("[::]", "::"),
            ("[fd00:ec2::254]", "fd00:ec2::254"),
        ])
    func literalHost(host: String, address: String) throws {
        let parsed = try #require(IPRange.Address(urlHost: host))
        #expect(parsed == IPRange.Address(address))
        #expect(parsed.description == address)
    }

    @Test(
        "a host name is not an address",
        arguments: ["example.com", "metadata.google.internal", "cafe.bad", "localhost", "", "[1.2.3.4]", "[::1", "1.2.3.4 x", "0x1g", "169.254.169.254.."])
    func hostNames(host: String) {
        #expect(IPRange.Address(urlHost: host) == nil)
    }

    @Test("libcurl's reading of a URL's host, which the check sees", arguments: [
        ("http://0x7f.1/a.png", "127.0.0.1"),
        ("http://2130706433/a.png", "127.0.0.1"),
        ("http://169.254.43518/latest", "169.254.169.254"),
        ("http://%31%36%39.254.169.254/", "169.254.169.254"),
        ("http://user@[fe80::1%25eth0]:8080/x", "[fe80::1]"),
        ("https://[0:0:0:0:0:ffff:169.254.169.254]/", "[::ffff:169.254.169.254]"),
        ("http://example.com:80/a.png", "example.com"),
    ])
    func curlHost(url: String, host: String) {
        #expect(CurlURL.host(of: url) == host)
    }

    @Test("the reason for a refused request names the URL, its host and the range")
    func requestRefusal() throws {
        let direct = try #require(
            AddressPolicy.default.requestRefusal(url: "http://[::ffff:a9fe:a9fe]/x", host: "[::ffff:a9fe:a9fe]", isRedirect: false))
        #expect(direct == "the URL's host [::ffff:a9fe:a9fe] (169.254.169.254) is refused: it is in the denied range 169.254.0.0/16")
        let redirect = try #require(
            AddressPolicy.default.requestRefusal(url: "http://169.254.169.254/latest", host: "169.254.169.254", isRedirect: true))
        #expect(redirect == "the redirect to http://169.254.169.254/latest is refused (host 169.254.169.254): it is in the denied range 169.254.0.0/16")
        #expect(AddressPolicy.default.requestRefusal(url: "http://example.com/", host: "example.com", isRedirect: true) == nil)
    }
}
