import ImgdCore
import ImgdNetwork
import ImgdTestSupport
import Testing

@testable import ImgdDaemon

@Suite("Host tables: rates, merging, and what a reload shows", .offThePool)
struct HostSettingsTests {
    @Test("rates per second, minute and hour become the interval between requests; nonsense is refused")
    func rates() throws {
        #expect(try HostSettings.interval(ofRate: "50/s") == .milliseconds(20))
        #expect(try HostSettings.interval(ofRate: "3000/m") == .milliseconds(20))
        #expect(try HostSettings.interval(ofRate: "1/h") == .seconds(3600))
        #expect(try HostSettings.interval(ofRate: "0.5/s") == .seconds(2))
        for bad in ["", "50", "50/d", "-1/s", "0/s", "x/s", "20000/s", "inf/s", "50/s/s"] {
            #expect(throws: (any Error).self, "\(bad)") { try HostSettings.interval(ofRate: bad) }
        }
    }

    @Test("a headers-file table lays over the file's: what it sets wins, headers merge by name, new patterns are added")
    func merge() throws {
        var base = HostSettings(pattern: try HostPattern("a.example"))
        base.maxPerHost = 8
        base.headers = [try RequestHeader(name: "Referer", value: "r"), try RequestHeader(name: "Authorization", value: "old")]
        var overlay = HostSettings(pattern: try HostPattern("A.example"))
        overlay.headers = [try RequestHeader(name: "authorization", value: "new")]
        let other = HostSettings(pattern: try HostPattern("*.b.example"))
        let merged = HostSettings.merge([base], [overlay, other])
        #expect(merged.count == 2)
        #expect(merged[0].maxPerHost == 8)
        #expect(merged[0].headers.map(\.line) == ["Referer: r", "authorization: new"])
        #expect(merged[1].pattern.text == "*.b.example")
        #expect(HostSettings.summary(merged) == "a.example (max-per-host: 8; headers: Referer,authorization); *.b.example ()")
    }

    @Test("the downloader's rule for a host is the most specific table's")
    func rules() throws {
        var wide = HostRules.Rule(hosts: try HostPattern("*.example.com"))
        wide.maxPerHost = 2
        var narrow = HostRules.Rule(hosts: try HostPattern("img.example.com"))
        narrow.maxPerHost = 16
        let rules = HostRules(rules: [wide, narrow])
        #expect(rules.rule(for: "img.example.com")?.maxPerHost == 16)
        #expect(rules.rule(for: "cdn.example.com")?.maxPerHost == 2)
        #expect(rules.rule(for: "example.com") == nil)
        #expect("\(try RequestHeader(name: "Authorization", value: "Bearer x"))" == "Authorization")
    }

    @Test("headers go over https to the table's port (443 without one), over http only with headers-over-http (80 without one); caps of a table without a port apply to every port")
    func headersBoundToSchemeAndPort() throws {
        func url(_ text: String) throws -> ImageURL { try ImageURL(text) }
        var unported = HostRules.Rule(hosts: try HostPattern("img.example.com"))
        unported.headers = [try RequestHeader(name: "Authorization", value: "Bearer x")]
        unported.maxPerHost = 2
        var ported = HostRules.Rule(hosts: try HostPattern("img.example.com:8443"))
        ported.headers = [try RequestHeader(name: "X-Port", value: "p")]
        let rules = HostRules(rules: [unported, ported])
        #expect(rules.headers(for: try url("https://img.example.com/a.png")).map(\.name) == ["Authorization"])
        #expect(rules.headers(for: try url("https://img.example.com:443/a.png")).map(\.name) == ["Authorization"])
        #expect(rules.headers(for: try url("http://img.example.com/a.png")).isEmpty, "over plain http without headers-over-http")
        #expect(rules.headers(for: try url("https://img.example.com:9443/a.png")).isEmpty, "to another port")
        #expect(rules.headers(for: try url("https://img.example.com:8443/a.png")).map(\.name) == ["X-Port"])
        #expect(rules.headers(for: try url("http://img.example.com:8443/a.png")).isEmpty)
        #expect(rules.headers(for: try url("https://other.example.com/a.png")).isEmpty)
        // Caps: the unported table's apply to every port its ported sibling does not name.
        #expect(rules.rule(for: try url("https://img.example.com:9443/a.png"))?.maxPerHost == 2)
        #expect(rules.rule(for: try url("http://img.example.com/a.png"))?.maxPerHost == 2)
        #expect(rules.rule(for: try url("https://img.example.com:8443/a.png"))?.maxPerHost == nil)

        var plain = HostRules.Rule(hosts: try HostPattern("img.example.com"))
        plain.headers = [try RequestHeader(name: "Authorization", value: "Bearer x")]
        plain.headersOverHTTP = true
        #expect(plain.headers(for: try url("http://img.example.com/a.png")).count == 1)
        #expect(plain.headers(for: try url("https://img.example.com/a.png")).count == 1)
        #expect(plain.headers(for: try url("http://img.example.com:8080/a.png")).isEmpty)
        var plainPorted = HostRules.Rule(hosts: try HostPattern("img.example.com:8080"))
        plainPorted.headers = plain.headers
        plainPorted.headersOverHTTP = true
        #expect(plainPorted.headers(for: try url("http://img.example.com:8080/a.png")).count == 1)
        #expect(plainPorted.headers(for: try url("https://img.example.com:8080/a.png")).count == 1)
        #expect(plainPorted.headers(for: try url("http://img.example.com/a.png")).isEmpty)
    }

    @Test("headers-over-http and ported keys are read from the file; a second table for the same host and port is refused, one for another port is not")
    func portedTablesFromTheFile() throws {
        let (config, _) = try DaemonConfigTests.load("""
            [host."img.example.com"]
            max-per-host = 2
            [host."img.example.com:8443"]
            headers = { Authorization = "Bearer x" }
            headers-over-http = true
            """)
        #expect(config.hosts.map(\.pattern.text) == ["img.example.com", "img.example.com:8443"])
        #expect(config.hosts[1].headersOverHTTP == true)
        #expect(config.downloadPolicy.hosts.headers(for: try ImageURL("http://img.example.com:8443/a.png")).count == 1)
        #expect(HostSettings.summary(config.hosts) == "img.example.com (max-per-host: 2); img.example.com:8443 (headers: Authorization; headers-over-http: true)")
        #expect(throws: ConfigError.self) { try DaemonConfigTests.load("[host.\"a.example:443\"]\n[host.\"A.example:0443\"]\n") }
        do {
            _ = try DaemonConfigTests.load("[host.\"a.example\"]\nheaders-over-http = \"yes\"\n")
            Issue.record("accepted")
        } catch {
            #expect(error.reason == "[host.\"a.example\"] headers-over-http: expected true or false, found a string", "\(error)")
        }
    }
}
