import ImgdTOML
import ImgdTestSupport
import Testing

/// Invalid TOML 1.0 documents, one rule broken in each, refused with the line to look at.
@Suite("TOML 1.0: invalid documents are refused with their line", .offThePool)
struct TOMLInvalidDocumentTests {
    struct Case: Sendable, CustomTestStringConvertible {
        let text: String
        let line: Int
        /// A word the reason must contain.
        let mentions: String

        init(_ text: String, line: Int = 1, _ mentions: String) {
            self.text = text
            self.line = line
            self.mentions = mentions
        }

        var testDescription: String { text.debugDescription }
    }

    static func check(_ invalid: Case) {
        do {
            let document = try TOMLDocument(parsing: invalid.text)
            Issue.record("accepted: \(invalid.text.debugDescription) as \(document.root.entries)")
        } catch {
            #expect(error.line == invalid.line, "\(invalid.text.debugDescription): \(error)")
            #expect(error.reason.contains(invalid.mentions), "\(invalid.text.debugDescription): \(error)")
        }
    }

    @Test("integers: leading zeros, misplaced underscores, signs on other bases, wrong digits, beyond 64 bits", arguments: [
        Case("a = 01", "leading zeros"),
        Case("a = -01", "leading zeros"),
        Case("a = 0_1", "leading zeros"),
        Case("a = 1__0", "underscores"),
        Case("a = 1_", "underscores"),
        Case("a = _1", "not a value"),
        Case("a = 0x_1", "underscores"),
        Case("a = 0x", "base 16"),
        Case("a = -0x1", "no sign"),
        Case("a = +0o7", "no sign"),
        Case("a = 0X1F", "decimal digits"),
        Case("a = 0b102", "base 2"),
        Case("a = 0o8", "base 8"),
        Case("a = 0xG", "base 16"),
        Case("a = 9223372036854775808", "64 bits"),
        Case("a = -9223372036854775809", "64 bits"),
        Case("a = 0x8000000000000000", "64 bits"),
        Case("a = 1 2", "unexpected text"),
        Case("a = 1x", "not a number"),
        Case("a = +", "decimal digits"),
        Case("a = ++99", "decimal digits"),
        Case("a = --99", "decimal digits"),
        Case("a = 0O0", "decimal digits"),
        Case("a = 0x1_", "base 16"),
        Case("a = _0b1", "not a value"),
    ])
    func integers(_ invalid: Case) { Self.check(invalid) }

    @Test("floats: no digit before or after the point, bad exponents, bad underscores, inf/nan spellings, overflow", arguments: [
        Case("a = .5", "before its point"),
        Case("a = -.5", "before its point"),
        Case("a = 1.", "after its point"),
        Case("a = 1.e5", "after its point"),
        Case("a = 1e", "exponent"),
        Case("a = 1e+", "exponent"),
        Case("a = 1e_5", "exponent"),
        Case("a = 1.5_", "after its point"),
        Case("a = 1._5", "after its point"),
        Case("a = 00.5", "leading zeros"),
        Case("a = 01e5", "leading zeros"),
        Case("a = 1.2.3", "after its point"),
        Case("a = 1.2_e2", "after its point"),
        Case("a = 1_e2", "decimal digits"),
        Case("a = 1e2_", "exponent"),
        Case("a = Inf", "not a value"),
        Case("a = NaN", "not a value"),
        Case("a = infinity", "not a value"),
        Case("a = 1e400", "range"),
    ])
    func floats(_ invalid: Case) { Self.check(invalid) }

    @Test("strings: unclosed, line ends in single-line strings, bad escapes and scalars, control characters", arguments: [
        Case("a = \"abc", "not closed"),
        Case("a = \"abc\nb = 1", "not closed on its line"),
        Case("a = 'abc\nb = 1", "not closed on its line"),
        Case("a = \"\\x41\"", "unknown escape"),
        Case("a = \"\\e\"", "unknown escape"),
        Case("a = \"\\ \"", "unknown escape"),
        Case("a = \"\\u00\"", "exactly 4"),
        Case("a = \"\\u00G1\"", "exactly 4"),
        Case("a = \"\\uD800\"", "not a Unicode scalar"),
        Case("a = \"\\U00110000\"", "not a Unicode scalar"),
        Case("a = \"bell\u{7}\"", "U+0007"),
        Case("a = \"nul\u{0}\"", "U+0000"),
        Case("a = \"del\u{7F}\"", "U+007F"),
        Case("a = 'esc\u{1B}'", "U+001B"),
        Case("a = 'cr\r'", "not closed on its line"),
        Case("a = \"x\" \"y\"", "unexpected text"),
        Case("a = \"\"\"abc", "not closed"),
        Case("a = '''abc\n\n", line: 3, "not closed"),
        Case("a = \"\"\"\nfine\nbad \u{1} here\n\"\"\"", line: 3, "U+0001"),
        Case("a = '''\nx\u{7F}'''", line: 2, "U+007F"),
        Case("a = \"\"\"a\rb\"\"\"", "carriage return"),
        Case("a = \"\"\"a \\  b\"\"\"", "unknown escape"),
        Case("a = \"\"\"abc\"\"\"\"\"\"", "6 quotes"),
        Case("a = '''abc''''''", "6 quotes"),
    ])
    func strings(_ invalid: Case) { Self.check(invalid) }

    @Test("comments and line ends: control characters, a carriage return alone", arguments: [
        Case("# del \u{7F}", "U+007F"),
        Case("a = 1 # nul \u{0}", "U+0000"),
        Case("a = 1\n# esc \u{1B}\n", line: 2, "U+001B"),
        Case("# vertical tab \u{B}", "U+000B"),
        Case("a = 1\rb = 2", "carriage return"),
        Case("a = 1 # cr \r b = 2", "U+000D"),
    ])
    func comments(_ invalid: Case) { Self.check(invalid) }

    @Test("keys: missing, malformed, twice, into a value, multi-line keys, two pairs on a line", arguments: [
        Case("= 1", "key is missing"),
        Case("a b = 1", "expected ="),
        Case("a. = 1", "key is missing"),
        Case(".a = 1", "expected a key"),
        Case("a..b = 1", "expected a key"),
        Case("a", "expected ="),
        Case("a =", "value is missing"),
        Case("a = # no value", "value is missing"),
        Case("a = hello", "not a value"),
        Case("a = 1\nb = 2\na = 3", line: 3, "defined twice (first on line 1)"),
        Case("\"a\" = 1\na = 2", line: 2, "defined twice"),
        Case("a.b = 1\na.b.c = 2", line: 2, "already an integer"),
        Case("a = 1\na.b = 2", line: 2, "already an integer"),
        Case("\"\"\"a\"\"\" = 1", "multi-line"),
        Case("'''a''' = 1", "multi-line"),
        Case("a = 1 b = 2", "unexpected text"),
        Case("ключ = 1", "bare keys"),
        Case("a = True", "not a value"),
        Case("a = truee", "not a value"),
    ])
    func keys(_ invalid: Case) { Self.check(invalid) }

    @Test("tables: defined twice, over a value or a dotted table, through a dotted key, malformed headers", arguments: [
        Case("[a]\nb = 1\n[a]", line: 3, "defined twice (first on line 1)"),
        Case("[a]\nb = 1\n[a.b]", line: 3, "already an integer"),
        Case("[a.b]\n[a]\nb = 1", line: 3, "defined twice"),
        Case("[fruit]\napple.color = \"red\"\n[fruit.apple]", line: 3, "dotted key"),
        Case("[fruit]\napple.taste.sweet = true\n[fruit.apple.taste]", line: 3, "dotted key"),
        Case("[fruit.apple]\n[fruit]\napple.color = \"red\"", line: 3, "dotted keys cannot add"),
        Case("[a.b.c]\nz = 9\n[a]\nb.c.t = 1", line: 4, "dotted keys cannot add"),
        Case("[a.b.c.d]\nz = 9\n[a]\nb.c.d.k.t = 1", line: 4, "dotted keys cannot add"),
        Case("x.y.z.w.key = 1\n[x]", line: 2, "dotted key on line 1"),
        Case("[]", "expected a key"),
        Case("[a", "expected ]"),
        Case("[a.]", "expected a key"),
        Case("[a]b = 1", "unexpected text"),
        Case("[ [a]]", "expected a key"),
        Case("[[a]\n", "expected ]]"),
        Case("[[a] ]", "expected ]]"),
        Case("a = 1\n[a]", line: 2, "already an integer"),
    ])
    func tables(_ invalid: Case) { Self.check(invalid) }

    @Test("inline tables: one line, no trailing comma, complete once written", arguments: [
        Case("a = {b = 1,}", "no comma after its last key"),
        Case("a = {b = 1\n}", "closed on the line"),
        Case("a = {\nb = 1}", "closed on the line"),
        Case("a = {b = 1 c = 2}", "expected , or }"),
        Case("a = {b = 1, b = 2}", "defined twice"),
        Case("a = {b.c = 1, b = 2}", "defined twice"),
        Case("a = {b = {c = 1}, b.d = 2}", "already a table"),
        Case("a = {b = 1}\n[a]", line: 2, "already a table"),
        Case("a = {b = 1}\n[a.c]", line: 2, "cannot be extended"),
        Case("a = {b = 1}\na.c = 2", line: 2, "cannot be extended"),
        Case("[x]\na = {}\n[x.a.b]", line: 3, "cannot be extended"),
        Case("t = { f = { a.c = \"red\" }, f.a.t = { s = true } }", "cannot be extended"),
    ])
    func inlineTables(_ invalid: Case) { Self.check(invalid) }

    @Test("arrays: separators, unclosed, and a static array is never an array of tables", arguments: [
        Case("a = [1 2]", "expected , or ]"),
        Case("a = [1,,2]", "missing before ,"),
        Case("a = [,]", "missing before ,"),
        Case("a = [1", "not closed"),
        Case("a = [\n1,\n2\n", line: 4, "not closed"),
        Case("a = []\n[[a]]", line: 2, "cannot be extended"),
        Case("a = [{b = 1}]\n[[a]]", line: 2, "cannot be extended"),
        Case("[[a]]\n[a]", line: 2, "array of tables"),
        Case("[a]\n[[a]]", line: 2, "already a table"),
        Case("[a.b]\n[[a]]", line: 2, "already a table"),
        Case("[[a]]\nb = 1\n[[a]]\nb = 1\nb = 2", line: 5, "defined twice (first on line 4)"),
        Case("a = [{b = 1}]\n[a.c]", line: 2, "cannot be extended"),
    ])
    func arrays(_ invalid: Case) { Self.check(invalid) }

    @Test("dates and times: out of range, missing seconds, bad offsets and separators", arguments: [
        Case("a = 1979-13-01", "not a valid date"),
        Case("a = 1979-00-10", "not a valid date"),
        Case("a = 1979-02-30", "not a valid date"),
        Case("a = 2001-02-29", "not a valid date"),
        Case("a = 1900-02-29", "not a valid date"),
        Case("a = 1979-5-27", "not a"),
        Case("a = 1979-05-27T25:00:00", "not a valid date"),
        Case("a = 1979-05-27T07:60:00", "not a valid date"),
        Case("a = 1979-05-27T07:32:61", "not a valid date"),
        Case("a = 1979-05-27T07:32", "not a valid date"),
        Case("a = 07:32", "not a valid date"),
        Case("a = 1979-05-27T07:32:00+25:00", "not a valid date"),
        Case("a = 1979-05-27T07:32:00+0700", "not a valid date"),
        Case("a = 1979-05-27T07:32:00.", "not a valid date"),
        Case("a = 1979-05-27X07:32:00", "not a valid date"),
        Case("a = 1979-05-27 07:32:00 Z", "unexpected text"),
    ])
    func dates(_ invalid: Case) { Self.check(invalid) }

    @Test("the line counted over comments, blank lines, CRLF, arrays and multi-line strings")
    func lineCounting() {
        Self.check(Case("# one\n\r\n\n  b = \"unclosed", line: 4, "not closed"))
        Self.check(Case("a = [\n  1, # one\n  2,\n]\nb = '''\n\n'''\nc = 01", line: 8, "leading zeros"))
    }

    @Test("every cut and every one-byte change of a valid document is read or refused, never a crash")
    func truncationsAndMutations() {
        let text = Array(#"""
            # settings
            a = "x\u00e9\"" # c
            b = """
            multi \
              line"""
            c = '''lit'''
            d = [1, 0x1F, 1e3, inf, 1979-05-27T07:32:00Z, 07:32:00.5, { e.f = 'g' }]
            [h."i j"]
            k.l = -0.5
            [[m]]
            n = 1979-05-27 07:32:00
            """#.utf8)
        var outcomes = (read: 0, refused: 0)
        func attempt(_ bytes: [UInt8]) {
            do {
                _ = try TOMLDocument(parsing: String(decoding: bytes, as: UTF8.self))
                outcomes.read += 1
            } catch {
                #expect(error.line >= 1 && error.line <= bytes.count + 1)
                outcomes.refused += 1
            }
        }
        #expect(throws: Never.self) { try TOMLDocument(parsing: String(decoding: text, as: UTF8.self)) }
        for end in 0...text.count { attempt(Array(text[..<end])) }
        let replacements: [UInt8] = [0x00, 0x0A, 0x0D, 0x20, 0x22, 0x27, 0x2C, 0x2E, 0x3D, 0x5B, 0x5D, 0x7B, 0x7D, 0x5C, 0x5F, 0x30, 0x23]
        for index in text.indices {
            for byte in replacements where text[index] != byte {
                var mutated = text
                mutated[index] = byte
                attempt(mutated)
            }
        }
        #expect(outcomes.read > 0 && outcomes.refused > 0, "\(outcomes)")
    }

    @Test("nesting deeper than the limit, or a key of too many parts, is refused, not a stack overflow")
    func depthLimit() {
        let limit = TOMLDocument.maximumDepth
        #expect(throws: Never.self) {
            try TOMLDocument(parsing: "a = " + String(repeating: "[", count: limit) + String(repeating: "]", count: limit))
        }
        Self.check(Case("a = " + String(repeating: "[", count: 100_000), "nested deeper"))
        Self.check(Case("a = " + String(repeating: "{ b = ", count: limit + 1) + "1" + String(repeating: "}", count: limit + 1), "nested deeper"))
        let longKey = Array(repeating: "a", count: limit + 1).joined(separator: ".")
        #expect(throws: Never.self) { try TOMLDocument(parsing: "[" + Array(repeating: "a", count: limit).joined(separator: ".") + "]") }
        Self.check(Case("\(longKey) = 1", "more than \(limit) dotted parts"))
        Self.check(Case("x = 1\n[\(longKey)]", line: 2, "more than \(limit) dotted parts"))
        Self.check(Case("a = 1\nb" + String(repeating: ".a", count: 200_000) + " = 1", line: 2, "more than \(limit) dotted parts"))
    }
}
