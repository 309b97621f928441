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
}
