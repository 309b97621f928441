import ImgdCore
import ImgdTestSupport
import Testing

@Suite("Echoed text", .offThePool)
struct EchoedTextTests {
    @Test("a forged journald line stays on one line, its priority prefix inert")
    func forgedJournalLine() {
        let escaped = EchoedText.escape("evil\n<0>imgd: FAKE EMERGENCY")
        #expect(escaped == #"evil\n<0>imgd: FAKE EMERGENCY"#)
        #expect(!escaped.utf8.contains(0x0A))
    }

    @Test("C0, DEL and C1 controls are escaped; printable text, tabs and non-ASCII letters are visible")
    func controls() {
        #expect(EchoedText.escape("a\u{1B}[2Jb") == #"a\x1b[2Jb"#)
        #expect(EchoedText.escape("\r\t\u{0}\u{7F}") == #"\r\t\x00\x7f"#)
        #expect(EchoedText.escape("x\u{85}y\u{9B}z") == #"x\u0085y\u009bz"#)
        #expect(EchoedText.escape("café ünïcödé 画像 🖼") == "café ünïcödé 画像 🖼")
        #expect(EchoedText.escape("\u{A0}") == "\u{A0}")  // the first code point after C1 is kept
    }

    @Test("a backslash is doubled, so an escape can never be spelled by the raw text")
    func backslash() {
        #expect(EchoedText.escape(#"a\nb"#) == #"a\\nb"#)
        #expect(EchoedText.escape("a\nb") != EchoedText.escape(#"a\nb"#))
    }

    @Test("bytes that are not UTF-8 are shown as \\xHH, valid sequences around them kept")
    func invalidUTF8() {
        #expect(EchoedText.escape(bytes: [0x61, 0xFF, 0x62]) == #"a\xffb"#)
        #expect(EchoedText.escape(bytes: [0xC3]) == #"\xc3"#)  // a truncated sequence
        #expect(EchoedText.escape(bytes: [0xC0, 0xAF]) == #"\xc0\xaf"#)  // an overlong '/'
        #expect(EchoedText.escape(bytes: [0xED, 0xA0, 0x80]) == #"\xed\xa0\x80"#)  // a surrogate
        #expect(EchoedText.escape(bytes: [0xF4, 0x90, 0x80, 0x80]) == #"\xf4\x90\x80\x80"#)  // above U+10FFFF
        #expect(EchoedText.escape(bytes: Array("é".utf8) + [0x80]) == #"é\x80"#)
    }

    @Test("long text is cut after the limit with a marker counting what was dropped")
    func cutAtLimit() {
        let junk = String(repeating: "x", count: 8192)
        let escaped = EchoedText.escape(junk)
        #expect(escaped == String(repeating: "x", count: 512) + "…[7680 more bytes]")
        #expect(EchoedText.escape(junk, limit: nil) == junk)
        #expect(EchoedText.escape(String(repeating: "y", count: 512)) == String(repeating: "y", count: 512))
        #expect(EchoedText.cut(junk, limit: 10) == "xxxxxxxxxx…[8182 more bytes]")
        #expect(EchoedText.cut("short") == "short")
    }

    @Test("a cut never splits a character: it moves back to the character's start")
    func cutOnCharacterBoundary() {
        // 511 ASCII bytes, then a 4-byte emoji straddling the 512-byte limit.
        let text = String(repeating: "a", count: 511) + "🖼" + "tail"
        let escaped = EchoedText.escape(text)
        #expect(escaped == String(repeating: "a", count: 511) + "…[8 more bytes]")
        let cut = EchoedText.cut(text)
        #expect(cut == String(repeating: "a", count: 511) + "…[8 more bytes]")
        // The emoji ending exactly at the limit is kept.
        let fits = String(repeating: "a", count: 508) + "🖼" + "tail"
        #expect(EchoedText.escape(fits) == String(repeating: "a", count: 508) + "🖼…[4 more bytes]")
    }

    @Test("the limit counts input bytes, so escapes cannot be used to blow it up past a bound")
    func escapedGrowthIsBounded() {
        let controls = [UInt8](repeating: 0x1B, count: 100_000)
        let escaped = EchoedText.escape(bytes: controls)
        // 512 bytes kept, each 4 bytes escaped, plus the marker.
        #expect(escaped.utf8.count <= 512 * 6 + 32)
        #expect(escaped.hasSuffix("…[99488 more bytes]"))
    }
}
