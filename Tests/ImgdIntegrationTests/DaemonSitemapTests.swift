import Foundation
import ImgdCore
import ImgdTestSupport
import Testing

/// Sitemaps dropped in the spool as `.xml` lists (issue 31 §8), through the real `imgd`: a
/// `<urlset>` gives its images, a `<sitemapindex>` its children's, fetched from a real origin
/// within the list's bounds; hostile XML is refused with a report and takes nothing with it.
@Suite("Daemon sitemaps (the real imgd)", .timeLimit(.minutes(5)), .offThePool)
struct DaemonSitemapTests {
    static let sitemapNS = "http://www.sitemaps.org/schemas/sitemap/0.9"
    static let imageNS = "http://www.google.com/schemas/sitemap-image/1.1"

    /// A `<urlset>`: each page with its image locations, the image namespace bound to `img:`.
    static func urlset(_ pages: [(loc: String, images: [String])]) -> String {
        var xml = #"<?xml version="1.0" encoding="UTF-8"?>"# + "\n"
        xml += #"<urlset xmlns="\#(sitemapNS)" xmlns:img="\#(imageNS)">"# + "\n"
        for page in pages {
            xml += "  <url>\n    <loc>\(escaped(page.loc))</loc>\n    <lastmod>2026-12-01</lastmod>\n"
            for image in page.images {
                xml += "    <img:image><img:loc>\(escaped(image))</img:loc><img:caption>a &lt;caption&gt;</img:caption></img:image>\n"
            }
            xml += "  </url>\n"
        }
        return xml + "</urlset>\n"
    }

    /// A `<sitemapindex>` naming `children`.
    static func index(_ children: [String]) -> String {
        var xml = #"<sitemapindex xmlns="\#(sitemapNS)">"# + "\n"
        for child in children { xml += "  <sitemap><loc>\(escaped(child))</loc></sitemap>\n" }
        return xml + "</sitemapindex>\n"
    }

    static func escaped(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
    }

    static func normalized(_ url: String) throws -> String { try ImageURL(url).normalized }

    static func sitemap(of report: [String: Any]) -> [String: Any] { report["sitemap"] as? [String: Any] ?? [:] }

    @Test("a urlset: image:loc entries under any prefix and <loc>s that are images are cached, entities and CDATA decoded; other pages skipped and counted, not errors")
    func urlsetList() async throws {
        let server = try await TestHTTPServer.start()
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let daemon = try await DaemonProcess.start(in: scratch.path)
        var xml = Self.urlset([
            (server.url("/pages/home.html"), [server.url("/img/a.png"), server.url("/img/b.gif?w=5&h=7")]),
            (server.url("/pages/about"), []),
            (server.url("/img/C.JPG?w=3"), [server.url("/img/d.png")]),
        ])
        // A CDATA location, and a location in a namespace imgd does not know (skipped whole).
        xml = xml.replacingOccurrences(
            of: "</urlset>",
            with: """
                <url><loc><![CDATA[\(server.url("/pages/x.php?a=1&b=2"))]]></loc><img:image><img:loc><![CDATA[\(server.url("/img/e.png?x=1&y=2"))]]></img:loc></img:image></url>
                <url xmlns:v="urn:video"><loc>\(server.url("/p"))</loc><v:video><v:loc>\(server.url("/img/not-me.png"))</v:loc></v:video></url>
              </urlset>
              """)
        try daemon.drop("site.xml", xml)

        let list = try #require(await daemon.finishedList("site.xml"), "log: \(daemon.log)")
        #expect(list["state"] as? String == "done", "\(list)")
        #expect(list["total"] as? Int == 5)
        #expect(list["cached"] as? Int == 5)
        let report = try #require(await daemon.report("site.xml", in: "done"))
        let sitemap = Self.sitemap(of: report)
        #expect(sitemap["kind"] as? String == "urlset")
        #expect(sitemap["non_image_locations_skipped"] as? Int == 4, "\(sitemap)")
        #expect(sitemap["children_fetched"] as? Int == 0)
        #expect(server.requestCount(prefix: "/pages/") == 0 && server.requestCount(prefix: "/p") == 0)
        #expect(server.requestCount(prefix: "/img/not-me") == 0)
        for path in ["/img/a.png", "/img/b.gif?w=5&h=7", "/img/C.JPG?w=3", "/img/d.png", "/img/e.png?x=1&y=2"] {
            #expect(server.requestCount(path) == 1, "\(path): \(server.requestLog)")
        }
        #expect(await daemon.stop() == 0)
        try await server.shutdown()
    }

    @Test("a sitemap index with two children: one 404 is named in the report with its reason, the other's images are cached; the children are not cached")
    func indexWithChildren() async throws {
        let server = try await TestHTTPServer.start()
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let daemon = try await DaemonProcess.start(in: scratch.path)
        let good = server.url("/maps/good.xml"), missing = server.url("/maps/missing.xml")
        let goodURL = try Self.normalized(good), missingURL = try Self.normalized(missing)
        server.serve(
            "/maps/good.xml",
            body: Array(Self.urlset([(server.url("/pages/1"), [server.url("/img/g1.png"), server.url("/img/g2.png")])]).utf8))
        // A child on the metadata address: refused by the address policy, as an image's URL is.
        let metadata = "http://169.254.169.254/latest/sitemap.xml"
        try daemon.drop("index.xml", Self.index([good, missing, metadata]))

        let list = try #require(await daemon.finishedList("index.xml"), "log: \(daemon.log)")
        #expect(list["state"] as? String == "failed")
        #expect(list["cached"] as? Int == 2)
        #expect(list["failed"] as? Int == 2)
        let report = try #require(await daemon.report("index.xml", in: "failed"))
        let failures = try #require(report["failures"] as? [[String: Any]])
        #expect(failures.count == 2)
        #expect(failures.last?["url"] as? String == metadata)
        #expect((failures.last?["message"] as? String)?.contains("(policy_denied)") == true, "\(failures)")
        #expect(failures.first?["url"] as? String == missingURL)
        #expect(failures.first?["code"] as? String == "bad_list")
        let message = failures.first?["message"] as? String ?? ""
        #expect(message.contains("http_404") && message.contains(missingURL), "\(message)")
        let sitemap = Self.sitemap(of: report)
        #expect(sitemap["kind"] as? String == "index")
        #expect(sitemap["children"] as? [String] == [goodURL])
        #expect(sitemap["children_fetched"] as? Int == 1)
        #expect(sitemap["children_failed"] as? Int == 2)
        #expect(sitemap["non_image_locations_skipped"] as? Int == 1)
        #expect(server.requestCount("/maps/good.xml") == 1)
        // The sitemap itself is not an image in the cache: a get of it fetches (and refuses) it.
        let asImage = try await daemon.call(#"{"cmd":"get","url":"\#(good)"}"#)
        #expect((asImage["error"] as? [String: Any])?["code"] as? String == "not_image", "\(asImage)")
        #expect(await daemon.stop() == 0)
        try await server.shutdown()
    }

    @Test("sitemap-max-depth and sitemap-max-children crossed, a cycle, and a child over what max-list-bytes leaves: each named in the report, the rest read")
    func limitsAndCycles() async throws {
        let server = try await TestHTTPServer.start()
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let daemon = try await DaemonProcess.start(
            in: scratch.path, arguments: ["--sitemap-max-depth", "3", "--sitemap-max-children", "4", "--max-list-bytes", "8KiB"])
        let url = { (path: String) in server.url(path) }
        var n: [String: String] = [:]
        for path in ["/a.xml", "/b.xml", "/deep.xml", "/level3.xml", "/big.xml", "/c.xml", "/d.xml"] { n[path] = try Self.normalized(url(path)) }
        // index.xml → a (an index) → b (an index) → a again: a cycle; and b → deep (an index),
        // whose child would be level 3.
        server.serve("/a.xml", body: Array(Self.index([url("/b.xml")]).utf8))
        server.serve("/b.xml", body: Array(Self.index([url("/a.xml"), url("/deep.xml")]).utf8))
        server.serve("/deep.xml", body: Array(Self.index([url("/level3.xml")]).utf8))
        server.serve("/level3.xml", body: Array(Self.urlset([(url("/p"), [url("/img/never.png")])]).utf8))
        // Over what 8 KiB leaves: about 9 KB of comments.
        server.serve("/big.xml", body: Array((Self.urlset([]) + String(repeating: "<!-- padding padding -->\n", count: 400)).utf8))
        server.serve("/c.xml", body: Array(Self.urlset([(url("/p"), [url("/img/c.png")])]).utf8))
        server.serve("/d.xml", body: Array(Self.urlset([(url("/p"), [url("/img/d.png")])]).utf8))
        try daemon.drop("index.xml", Self.index([url("/a.xml"), url("/big.xml"), url("/c.xml"), url("/d.xml")]))

        let list = try #require(await daemon.finishedList("index.xml"), "log: \(daemon.log)")
        let report = try #require(await daemon.report("index.xml", in: "failed"), "log: \(daemon.log)")
        let failures = try #require(report["failures"] as? [[String: Any]])
        let messages = Dictionary(
            failures.map { ($0["url"] as? String ?? "", $0["message"] as? String ?? "") }, uniquingKeysWith: { $0 + " | " + $1 })
        #expect(messages[n["/a.xml"]!]?.contains("a cycle") == true, "\(messages)")
        #expect(messages[n["/level3.xml"]!]?.contains("deeper than sitemap-max-depth (3)") == true, "\(messages)")
        #expect(messages[n["/big.xml"]!]?.contains("too large") == true, "\(messages)")
        // a, b, deep, big: four children asked for; c is the fifth.
        #expect(messages[n["/c.xml"]!]?.contains("sitemap-max-children (4)") == true, "\(messages)")
        #expect(messages[n["/d.xml"]!] == nil, "said once: \(messages)")
        #expect(failures.allSatisfy { $0["code"] as? String == "bad_list" })
        let sitemap = Self.sitemap(of: report)
        #expect(sitemap["children"] as? [String] == ["/a.xml", "/b.xml", "/deep.xml"].map { n[$0]! })
        #expect(sitemap["children_failed"] as? Int == 1)  // big
        #expect(sitemap["children_not_read"] as? Int == 4)  // a again, level3, c, d
        #expect(server.requestCount("/level3.xml") == 0 && server.requestCount("/c.xml") == 0 && server.requestCount("/d.xml") == 0)
        #expect(server.requestCount("/a.xml") == 1)
        #expect(list["cached"] as? Int == 0)
        #expect(await daemon.stop() == 0)
        try await server.shutdown()
    }

    @Test("DTDs and entity expansion are refused with a clear error, nothing is fetched for them, and what was cached and queued stays")
    func hostileXML() async throws {
        let server = try await TestHTTPServer.start()
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let daemon = try await DaemonProcess.start(in: scratch.path)
        let kept = server.url("/img/kept.png")
        try daemon.drop("first.txt", kept + "\n")
        _ = try #require(await daemon.finishedList("first.txt"), "log: \(daemon.log)")

        let laughs = """
            <?xml version="1.0"?>
            <!DOCTYPE urlset [
              <!ENTITY lol "lol">
              <!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
              <!ENTITY xxe SYSTEM "\(server.url("/secret"))">
            ]>
            <urlset xmlns="\(Self.sitemapNS)"><url><loc>\(server.url("/img/x.png"))?&lol2;&xxe;</loc></url></urlset>
            """
        let external = """
            <?xml version="1.0"?>
            <!DOCTYPE urlset SYSTEM "\(server.url("/sitemap.dtd"))">
            <urlset xmlns="\(Self.sitemapNS)"><url><loc>\(server.url("/img/y.png"))</loc></url></urlset>
            """
        let undeclared = """
            <urlset xmlns="\(Self.sitemapNS)"><url><loc>\(server.url("/img/z.png"))?&xxe;</loc></url></urlset>
            """
        try daemon.drop("laughs.xml", laughs)
        try daemon.drop("external.xml", external)
        try daemon.drop("undeclared.xml", undeclared)
        for (name, words) in [
            ("laughs.xml", "DTDs are refused"), ("external.xml", "must not have a <!DOCTYPE>"), ("undeclared.xml", "unknown entity &xxe;"),
        ] {
            let report = try #require(await daemon.report(name, in: "failed"), "\(name): log: \(daemon.log)")
            let failures = report["failures"] as? [[String: Any]] ?? []
            #expect(failures.count == 1, "\(name): \(failures)")
            #expect(failures.first?["code"] as? String == "bad_list")
            let message = failures.first?["message"] as? String ?? ""
            #expect(message.contains(words), "\(name): \(message)")
        }
        #expect(server.requestCount("/secret") == 0 && server.requestCount("/sitemap.dtd") == 0)
        #expect(server.requestCount(prefix: "/img/x") == 0 && server.requestCount(prefix: "/img/y") == 0)
        let again = try await daemon.result(#"{"cmd":"get","url":"\#(kept)"}"#)
        #expect(again["source"] as? String != "network", "\(again)")
        #expect(server.requestCount("/img/kept.png") == 1)
        #expect(await daemon.stop() == 0)
        try await server.shutdown()
    }

    /// `bytes` compressed by gzip(1).
    static func gzip(_ bytes: [UInt8]) throws -> [UInt8] {
        let scratch = try ScratchFolder("imgd-gzip")
        defer { scratch.remove() }
        let path = scratch.path("data")
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/gzip")
        process.arguments = ["-n", "-9", path]
        try process.run()
        process.waitUntilExit()
        try #require(process.terminationStatus == 0)
        return Array(try Data(contentsOf: URL(fileURLWithPath: path + ".gz")))
    }

    @Test("gzip: a .xml.gz dropped in the spool and a compressed child are inflated and read; a child that inflates past the bound is refused, named in the report")
    func compressed() async throws {
        let server = try await TestHTTPServer.start()
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let daemon = try await DaemonProcess.start(in: scratch.path)
        server.serve(
            "/z.xml.gz", body: try Self.gzip(Array(Self.urlset([(server.url("/p"), [server.url("/img/z.png")])]).utf8)),
            contentType: "application/gzip")
        // 60 MB of spaces after the root: a bomb of about 60 KB.
        var bomb = Array(Self.urlset([]).utf8)
        bomb.append(contentsOf: [UInt8](repeating: 0x20, count: 60 << 20))
        server.serve("/bomb.xml.gz", body: try Self.gzip(bomb), contentType: "application/gzip")
        let compressed = try Self.gzip(Array(Self.index([server.url("/z.xml.gz"), server.url("/bomb.xml.gz")]).utf8))
        let temp = daemon.spool + "/.site.xml.gz.tmp"
        try Data(compressed).write(to: URL(fileURLWithPath: temp))
        try #require(rename(temp, daemon.spool + "/site.xml.gz") == 0)

        let list = try #require(await daemon.finishedList("site.xml.gz"), "log: \(daemon.log)")
        #expect(list["cached"] as? Int == 1, "\(list)")
        #expect(server.requestCount("/img/z.png") == 1)
        let report = try #require(await daemon.report("site.xml.gz", in: "failed"))
        let failures = report["failures"] as? [[String: Any]] ?? []
        #expect(failures.count == 1)
        let bombURL = try Self.normalized(server.url("/bomb.xml.gz")), zURL = try Self.normalized(server.url("/z.xml.gz"))
        #expect(failures.first?["url"] as? String == bombURL)
        #expect((failures.first?["message"] as? String)?.contains("inflates to more than 52428800 bytes") == true, "\(failures)")
        #expect(Self.sitemap(of: report)["children"] as? [String] == [zURL])
        #expect(Self.sitemap(of: report)["children_failed"] as? Int == 1)
        #expect(await daemon.stop() == 0)
        try await server.shutdown()
    }

    @Test("a broken XML file and one that is no sitemap go to failed/ with a report (what came before the fault is kept); a plist named .xml is read as a plist; other lists are unaffected")
    func badXML() async throws {
        let server = try await TestHTTPServer.start()
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let daemon = try await DaemonProcess.start(in: scratch.path)
        let broken = """
            <urlset xmlns="\(Self.sitemapNS)" xmlns:image="\(Self.imageNS)">
              <url><loc>\(server.url("/p"))</loc><image:image><image:loc>\(server.url("/img/before.png"))</image:loc></image:image></url>
              <url><loc>\(server.url("/img/after.png"))</lo></url>
            </urlset>
            """
        try daemon.drop("broken.xml", broken)
        try daemon.drop("page.xml", "<html><body>not a sitemap</body></html>")
        try daemon.drop("noname.xml", #"<urlset><url><loc>\#(server.url("/img/n.png"))</loc></url></urlset>"#)
        try daemon.drop(
            "apple.xml",
            #"<?xml version="1.0"?><!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd"><plist version="1.0"><array><string>\#(server.url("/img/plist.png"))</string></array></plist>"#)
        try daemon.drop("other.txt", server.url("/img/other.png") + "\n")

        let other = try #require(await daemon.finishedList("other.txt"), "log: \(daemon.log)")
        #expect(other["state"] as? String == "done")
        let apple = try #require(await daemon.finishedList("apple.xml"), "log: \(daemon.log)")
        #expect(apple["state"] as? String == "done" && apple["cached"] as? Int == 1, "\(apple)")

        let brokenReport = try #require(await daemon.report("broken.xml", in: "failed"), "log: \(daemon.log)")
        #expect(brokenReport["cached"] as? Int == 1)
        let brokenFailure = (brokenReport["failures"] as? [[String: Any]])?.first
        #expect(brokenFailure?["code"] as? String == "bad_list")
        #expect(brokenFailure?["line"] as? Int == 3)
        #expect((brokenFailure?["message"] as? String)?.contains("</lo> does not close <loc>") == true, "\(String(describing: brokenFailure))")
        #expect(server.requestCount("/img/after.png") == 0)

        for (name, words) in [("page.xml", "<html>"), ("noname.xml", "not in the sitemap namespace")] {
            let report = try #require(await daemon.report(name, in: "failed"), "\(name): log: \(daemon.log)")
            let message = (report["failures"] as? [[String: Any]])?.first?["message"] as? String ?? ""
            #expect(message.contains("is not a sitemap") && message.contains(words), "\(name): \(message)")
        }
        #expect(server.requestCount("/img/n.png") == 0)
        #expect(await daemon.stop() == 0)
        try await server.shutdown()
    }
}
