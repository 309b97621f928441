import Foundation
import ImgdTestSupport
import Testing

@testable import ImgdCore

@Suite("Link lists as XML sitemaps", .offThePool)
struct LinkListSitemapTests {
    static let sitemapNS = "http://www.sitemaps.org/schemas/sitemap/0.9"
    static let imageNS = "http://www.google.com/schemas/sitemap-image/1.1"

    /// Reads `text` as an `.xml` file in `chunkSize`-byte reads, and again from memory; both must agree.
    private func read(_ text: String, chunkSize: Int = LinkListReader.chunkSize) throws -> (
        outcome: LinkListFixture.Outcome, kind: SitemapKind?, skipped: Int
    ) {
        let outcome = try LinkListFixture.read(text, fileExtension: "xml", chunkSize: chunkSize)
        var memory = LinkListReader(xml: Array(text.utf8), path: "memory")
        var entries: [LinkListEntry] = []
        var error: LinkListError?
        do {
            while let entry = try memory.next() { entries.append(entry) }
        } catch let failure {
            error = failure
        }
        #expect(entries.map(\.text) == outcome.entries.map(\.text))
        #expect(entries.map(\.isSitemap) == outcome.entries.map(\.isSitemap))
        #expect((error == nil) == (outcome.error == nil))
        return (outcome, memory.sitemapKind, memory.skippedPageLocations)
    }

    @Test("a urlset: image:loc under any prefix, page <loc>s that are images by extension (any case), others skipped and counted")
    func urlset() throws {
        let xml = """
            <?xml version="1.0" encoding="UTF-8"?>
            <urlset xmlns="\(Self.sitemapNS)" xmlns:pic="\(Self.imageNS)">
              <url>
                <loc>https://a.example/page.html</loc>
                <lastmod>2026-01-01</lastmod>
                <pic:image><pic:loc>https://a.example/1.png</pic:loc><pic:title>t</pic:title></pic:image>
                <pic:image><pic:loc> https://a.example/2.webp?a=1&amp;b=2 </pic:loc></pic:image>
              </url>
              <url><loc>https://a.example/Photo.JPEG#x</loc></url>
              <url><loc>https://a.example/dir.png/page</loc></url>
              <url><loc><![CDATA[https://a.example/c.svg?q=<1>]]></loc></url>
              <url><loc>https://a.example/</loc></url>
            </urlset>
            """
        for chunk in [1, 3, 64, LinkListReader.chunkSize] {
            let (outcome, kind, skipped) = try read(xml, chunkSize: chunk)
            #expect(outcome.error == nil, "\(String(describing: outcome.error))")
            #expect(outcome.entries.map(\.text) == [
                "https://a.example/1.png", "https://a.example/2.webp?a=1&b=2", "https://a.example/Photo.JPEG#x",
                "https://a.example/c.svg?q=<1>",
            ])
            #expect(outcome.entries.map(\.line) == [6, 7, 9, 11])
            #expect(outcome.entries.allSatisfy { !$0.isSitemap })
            #expect(kind == .urlset)
            #expect(skipped == 3)
        }
    }

    @Test("a sitemap index: each <sitemap><loc> is an entry marked as a sitemap; prefixed sitemap elements work")
    func index() throws {
        let (outcome, kind, _) = try read("""
            <sm:sitemapindex xmlns:sm="\(Self.sitemapNS)">
              <sm:sitemap><sm:loc>https://a.example/s1.xml</sm:loc><sm:lastmod>x</sm:lastmod></sm:sitemap>
              <sm:sitemap><sm:loc>https://a.example/s2.xml.gz</sm:loc></sm:sitemap>
            </sm:sitemapindex>
            """)
        #expect(outcome.error == nil)
        #expect(outcome.entries.map(\.text) == ["https://a.example/s1.xml", "https://a.example/s2.xml.gz"])
        #expect(outcome.entries.allSatisfy { $0.isSitemap })
        #expect(kind == .index)
    }

    @Test("elements are known by namespace, not prefix: a foreign image:loc and a loc outside its place are skipped")
    func namespaces() throws {
        let (outcome, _, _) = try read("""
            <urlset xmlns="\(Self.sitemapNS)" xmlns:image="urn:not-images">
              <url><image:image><image:loc>https://a.example/no.png</image:loc></image:image>
                <x:image xmlns:x="\(Self.imageNS)"><x:loc>https://a.example/yes.png</x:loc></x:image>
                <extra><loc>https://a.example/nested.png</loc></extra>
              </url>
            </urlset>
            """)
        #expect(outcome.error == nil)
        #expect(outcome.entries.map(\.text) == ["https://a.example/yes.png"])
    }

    @Test("DTDs, undeclared entities, unbound prefixes and foreign roots are malformed, with the line and a reason")
    func refused() throws {
        let cases: [(String, Int, String)] = [
            ("<!DOCTYPE urlset [<!ENTITY a \"b\">]>\n<urlset xmlns=\"\(Self.sitemapNS)\"/>", 1, "DTDs are refused"),
            ("<!DOCTYPE urlset SYSTEM \"http://x/\">\n<urlset xmlns=\"\(Self.sitemapNS)\"/>", 2, "must not have a <!DOCTYPE>"),
            ("<urlset xmlns=\"\(Self.sitemapNS)\"><url><loc>&xxe;</loc></url></urlset>", 1, "unknown entity &xxe;"),
            ("<urlset xmlns=\"\(Self.sitemapNS)\">\n<x:url/></urlset>", 2, "prefix 'x'"),
            ("<urlset><url/></urlset>", 1, "not in the sitemap namespace"),
            ("<rss/>", 1, "the root element <rss>"),
            ("\u{1F}\u{8B}\u{8}", 1, "compressed"),
            ("<urlset xmlns=\"\(Self.sitemapNS)\"><url></urlset>", 1, "</urlset> does not close <url>"),
        ]
        for (xml, line, words) in cases {
            let (outcome, _, _) = try read(xml)
            let malformed = outcome.malformed
            #expect(malformed?.line == line, "\(xml): \(String(describing: malformed))")
            #expect(malformed?.reason.contains(words) == true, "\(xml): \(String(describing: malformed))")
        }
    }

    @Test("an .xml file whose root is <plist> is read as a property list")
    func plistRoot() throws {
        let (outcome, kind, _) = try read(
            #"<?xml version="1.0"?><!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "x.dtd"><plist version="1.0"><array><string>https://a.example/1.png</string></array></plist>"#)
        #expect(outcome.error == nil)
        #expect(outcome.entries.map(\.text) == ["https://a.example/1.png"])
        #expect(kind == nil)
    }

    @Test("deep nesting is refused, not followed")
    func nesting() throws {
        let deep = String(repeating: "<a>", count: 100) + String(repeating: "</a>", count: 100)
        let (outcome, _, _) = try read("<urlset xmlns=\"\(Self.sitemapNS)\">\(deep)</urlset>")
        #expect(outcome.malformed?.reason.contains("nested more than 64") == true)
    }
}
