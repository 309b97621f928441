import Foundation
import ImgdTestSupport
import Testing

@testable import ImgdCore

@Suite("Link lists as XML property lists", .offThePool)
struct LinkListPlistTests {
    private func read(_ text: String, chunkSize: Int = LinkListReader.chunkSize) throws -> LinkListFixture.Outcome {
        try LinkListFixture.read(text, fileExtension: "plist", chunkSize: chunkSize)
    }

    /// `body` inside an array inside a plist, as a `.plist` file written by Xcode would hold it.
    private func plist(_ body: String) -> String {
        """
        <?xml version="1.0" encoding="UTF-8"?>
        <!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
        <plist version="1.0">
        <array>
        \(body)
        </array>
        </plist>

        """
    }

    @Test("strings become entries with the line their tag starts on; declaration, DOCTYPE, comments")
    func wholeDocument() throws {
        let outcome = try read(plist("""
            \t<string>https://a.example/1.png</string>
            <!-- a comment, with <string>markup</string> in it -->

              <string>
                http://b.example/2.jpg
              </string><string>ftp://c.example/3.png</string>
            """))
        #expect(outcome.error == nil)
        #expect(outcome.entries.map(\.line) == [5, 8, 10])
        #expect(outcome.entries.compactMap { try? $0.url.get().normalized } == ["https://a.example/1.png", "http://b.example/2.jpg"])
        #expect(outcome.entries[1].text == "http://b.example/2.jpg")
        #expect(outcome.entries[2].url.failureValue == .unsupportedScheme("ftp"))
    }

    @Test("a minimal plist: no declaration, attributes in either quotes, an empty array")
    func minimal() throws {
        let one = try read("<plist><array><string>http://a.example/1.png</string></array></plist>")
        #expect(one.error == nil)
        #expect(one.entries.map(\.text) == ["http://a.example/1.png"])
        let quoted = try read("<plist version='1.0' note=\"a>b\" ><array ><string >http://a.example/1.png</string ></array></plist >")
        #expect(quoted.error == nil)
        #expect(quoted.entries.count == 1)
        #expect(try read("\u{FEFF}<plist><array/></plist>").entries.isEmpty)
        #expect(try read(plist("")).entries.isEmpty)
    }

    @Test("entities and character references decode")
    func entities() throws {
        let outcome = try read(plist("""
            <string>https://a.example/?a=1&amp;b=2</string>
            <string>&lt;&gt;&quot;&apos;&#65;&#x42;&#233;&#x1F600;</string>
            """))
        #expect(outcome.error == nil)
        #expect(outcome.entries.map(\.text) == ["https://a.example/?a=1&b=2", #"<>"'ABé😀"#])
        #expect(try outcome.entries[0].url.get().normalized == "https://a.example/?a=1&b=2")
    }

    @Test("CDATA sections and comments inside a string")
    func cdataAndComments() throws {
        let outcome = try read(plist("""
            <string><![CDATA[https://a.example/?a=1&b=<2>]]></string>
            <string>https://a.<!-- not part of it -->example/<![CDATA[x]]]>y.png</string>
            <string><![CDATA[]]></string>
            """))
        #expect(outcome.error == nil)
        #expect(outcome.entries.map(\.text) == ["https://a.example/?a=1&b=<2>", "https://a.example/x]y.png", ""])
    }

    @Test("<string/> and <string></string> are empty strings, reported as empty")
    func emptyStrings() throws {
        let outcome = try read(plist("<string/><string></string><string />"))
        #expect(outcome.entries.count == 3)
        #expect(outcome.entries.allSatisfy { $0.url.failureValue == .empty })
    }

    @Test("elements that are not strings are error entries, skipped whole, nested ones too")
    func nonStrings() throws {
        let outcome = try read(plist("""
            <integer>42</integer><true/>
            <dict>
              <key>url</key><string>https://in.example/1.png</string>
              <key>more</key><array><array/><string>&amp;</string><![CDATA[</dict>]]></array>
            </dict>
            <real>1.5</real><data>AAAA</data><date>2024-01-01T00:00:00Z</date><false/>
            <string>https://ok.example/1.png</string>
            """))
        #expect(outcome.error == nil)
        let reasons = outcome.entries.map { entry -> String in
            guard case .failure(.malformed(_, let reason)) = entry.url else { return "ok" }
            return reason
        }
        #expect(reasons == [
            "not a string but <integer>", "not a string but <true>", "not a string but <dict>",
            "not a string but <real>", "not a string but <data>", "not a string but <date>",
            "not a string but <false>", "ok",
        ])
        #expect(outcome.entries.map(\.line) == [5, 5, 6, 10, 10, 10, 10, 11])
        #expect(outcome.entries[0].text == "<integer>42</integer>")
        #expect(outcome.entries[1].text == "<true/>")
        #expect(outcome.entries[2].text.hasPrefix("<dict>\n  <key>url</key>"))
    }

    @Test("nesting is followed to 64 levels inside an element and refused beyond")
    func nestingCap() throws {
        func nested(_ depth: Int) -> String {
            String(repeating: "<array>", count: depth) + String(repeating: "</array>", count: depth)
        }
        let ok = try read(plist(nested(64) + "<string>http://a.example/1.png</string>"))
        #expect(ok.error == nil)
        #expect(ok.entries.count == 2)
        let refused = try read(plist("<string>http://a.example/1.png</string>\n" + nested(65)))
        #expect(refused.entries.count == 1)
        #expect(refused.malformed?.line == 6)
        #expect(refused.malformed?.reason.contains("nested more than 64") == true)
    }

    @Test("an over-long string is reported with its length and skipped without being held")
    func overlongString() throws {
        let long = "https://a.example/?q=" + String(repeating: "&amp;", count: 20_000)
        let chunkSize = 4096
        let outcome = try read(plist("<string>\(long)</string>\n<string>https://a.example/ok.png</string>"), chunkSize: chunkSize)
        #expect(outcome.error == nil)
        #expect(outcome.entries.count == 2)
        #expect(outcome.entries[0].url.failureValue == .tooLong(length: 21 + 20_000, limit: ImageURL.maximumLength))
        #expect(outcome.entries[0].text.count == 200)
        #expect((try? outcome.entries[1].url.get()) != nil)
        #expect(outcome.peakBufferedBytes <= chunkSize + ImageURL.maximumLength + 1024)
    }

    @Test("items split across reads come out whole, at every read size")
    func chunkBoundaries() throws {
        let text = plist("""
            <string>https://a.example/?a=1&amp;b=&#x1F600;é</string><!-- c -- c -->
            <string><![CDATA[https://b.example/]]]]>x</string><dict><key>k</key><integer>1</integer></dict>
            <string/>
            """)
        try LinkListFixture.expectSameAtEveryChunkSize(Array(text.utf8), fileExtension: "plist")
        let outcome = try read(text, chunkSize: 1)
        #expect(outcome.entries.map(\.text) == ["https://a.example/?a=1&b=😀é", "https://b.example/]]x", "<dict><key>k</key><integer>1</integer></dict>", ""])
    }

    @Test("a binary plist is refused with a reason saying to use XML")
    func binaryPlist() throws {
        let bytes = Array("bplist00".utf8) + [0xA1, 0x01, 0x5F, 0x10, 0x17] + Array("https://a.example/1.png".utf8) + [0x08, 0x0A]
        let outcome = try LinkListFixture.read(bytes, fileExtension: "plist")
        #expect(outcome.entries.isEmpty)
        let malformed = try #require(outcome.malformed)
        #expect(malformed.line == 1)
        #expect(malformed.reason.contains("binary property lists are not supported"))
        #expect(malformed.reason.contains("XML"))
    }

    @Test(
        "syntax errors throw with their line, after the entries before them",
        arguments: [
            ("", 1, 0, "no <plist> element"),
            ("bad list", 1, 0, "expected an XML property list"),
            ("  x<plist/>", 1, 0, "expected '<' of the <plist> element"),
            ("<array><string>a</string></array>", 1, 0, "the root element must be <plist>"),
            ("<plist>\n<dict></dict></plist>", 2, 0, "must hold an <array>"),
            ("<plist></plist>", 1, 0, "holds no <array>"),
            ("<plist/>", 1, 0, "<plist/> is empty"),
            ("<plist><array>\n<string>a</string>\n<string>b</array></plist>", 3, 1, "expected </string>, found </array>"),
            ("<plist><array>\n<string>a</string>\n<string>b", 3, 1, "unterminated <string>"),
            ("<plist><array>\n<string>a</string>\nhttp://b.example/</array></plist>", 3, 1, "text between the elements"),
            ("<plist><array>\n<string>a</string>\n</array>", 3, 1, "the file ends after </array>"),
            ("<plist><array>\n<string>a</string>\n</array></plist>\n<plist/>", 4, 1, "unexpected markup after </plist>"),
            ("<plist><array>\n<string>a</string>\n</array></plist>\nx", 4, 1, "unexpected 'x' after </plist>"),
            ("<plist><array>\n<string>a</string>\n<foo>1</foo></array></plist>", 3, 1, "unknown element <foo>"),
            ("<plist><array>\n<string>a</string>\n<integerx/></array></plist>", 3, 1, "unknown element <integer…>"),
            ("<plist><array>\n<string>a</string>\n<string>a &nbsp; b</string></array></plist>", 3, 1, "unknown entity &nbsp;"),
            ("<plist><array>\n<string>a</string>\n<string>a & b</string></array></plist>", 3, 1, "'&' must start an entity"),
            ("<plist><array>\n<string>a</string>\n<string>&#0;</string></array></plist>", 3, 1, "&#0; is not a character"),
            ("<plist><array>\n<string>a</string>\n<string>&#xD800;</string></array></plist>", 3, 1, "is not a character"),
            ("<plist><array>\n<string>a</string>\n<string>a < b</string></array></plist>", 3, 1, "'<' must start a tag"),
            ("<plist><array>\n<string>a</string>\n<string><b/></string></array></plist>", 3, 1, "unknown element <b>"),
            ("<plist><array>\n<string>a</string>\n<string><true/></string></array></plist>", 3, 1, "element <true> inside a <string>"),
            ("<plist><array>\n<string>a</string>\n<dict></array></dict></array></plist>", 3, 1, "</array> does not close <dict>"),
            ("<plist><array>\n<string>a</string>\n<dict>", 3, 1, "unterminated <dict>"),
            ("<plist><array>\n<string>a</string>\n<!-- open", 3, 1, "unterminated comment"),
            ("<plist><array>\n<string>a</string>\n<string><![CDATA[x</string>", 3, 1, "unterminated CDATA"),
            ("<plist><array>\n<string>a</string>\n<![CDATA[x]]></array></plist>", 3, 1, "found a CDATA section"),
            ("<plist><array>\n<string>a</string>\n<!DOCTYPE plist></array></plist>", 3, 1, "found <!DOCTYPE>"),
            ("<plist><array>\n<string>a</string>\n<!ENTITY x></array></plist>", 3, 1, "unknown markup after '<!'"),
            ("<plist version=1.0><array/></plist>", 1, 0, "expected a quoted attribute value"),
            ("<plist version=\"1.0\"version=\"2\"><array/></plist>", 1, 0, "unexpected 'v' in the <plist> tag"),
            ("<plist><array>\n<string>a</string>\n<string>\u{1}</string></array></plist>", 3, 1, "control character U+0001"),
            ("<plist><array>\n<string>a</string>\n<string>b</string  x></array></plist>", 3, 1, "expected '>' to end </string"),
        ])
    func syntaxErrors(text: String, line: Int, before: Int, reason: String) throws {
        let outcome = try read(text)
        #expect(outcome.entries.count == before)
        let malformed = try #require(outcome.malformed)
        #expect(malformed.line == line)
        #expect(malformed.reason.contains(reason), "\(malformed.reason)")
    }

    @Test("invalid UTF-8 is a syntax error at its line, after the entries before it")
    func invalidUTF8() throws {
        let text = plist("<string>http://a.example/1.png</string>\n<string>http://a.example/@</string>")
        let bytes = Array(text.utf8).map { $0 == UInt8(ascii: "@") ? 0xFF : $0 }
        let outcome = try LinkListFixture.read(bytes, fileExtension: "plist")
        #expect(outcome.entries.count == 1)
        #expect(outcome.malformed?.line == 6)
        #expect(outcome.malformed?.reason.contains("invalid UTF-8") == true)
    }
}
