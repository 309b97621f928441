import Foundation
import ImgdTestSupport
import Testing

@testable import ImgdCore

@Suite("Link lists in JSON", .offThePool)
struct LinkListJSONTests {
    private func read(_ text: String, chunkSize: Int = LinkListReader.chunkSize) throws -> LinkListFixture.Outcome {
        try LinkListFixture.read(text, fileExtension: "json", chunkSize: chunkSize)
    }

    @Test("strings become entries with the line each starts on; whitespace anywhere")
    func multiLineDocument() throws {
        let json = " \n[\n  \"https://a.example/1.png\",\r\n\n\t\"http://b.example/2.jpg\"  ,   \"ftp://c.example/3.png\",\n\"not a url\"\n]\n\n"
        let outcome = try read(json)
        #expect(outcome.error == nil)
        #expect(outcome.entries.map(\.line) == [3, 5, 5, 6])
        #expect(outcome.entries.compactMap { try? $0.url.get().normalized } == ["https://a.example/1.png", "http://b.example/2.jpg"])
        #expect(outcome.entries[2].url.failureValue == .unsupportedScheme("ftp"))
        #expect(outcome.entries[3].text == "not a url")
        #expect(outcome.entries[3].url.failureValue != nil)
        #expect(outcome.pin == nil)
    }

    @Test("an empty array is an empty list; a byte order mark is ignored")
    func emptyAndBOM() throws {
        #expect(try read("[]").entries.isEmpty)
        #expect(try read("  [ \n ]  ").entries.isEmpty)
        let withBOM = try read("\u{FEFF}[\"http://a.example/1.png\"]")
        #expect(withBOM.error == nil)
        #expect(withBOM.entries.count == 1)
    }

    @Test("every escape decodes: quote, backslash, slash, \\b \\f \\n \\r \\t, \\u, surrogate pairs")
    func escapes() throws {
        let json = #"""
            ["https:\/\/a.example\/p\u0061th\/\u00E9.png", "https://a.example/\ud83d\ude00.png", "a\"b\\c", "x\b\f\n\r\ty"]
            """#
        let outcome = try read(json)
        #expect(outcome.error == nil)
        #expect(outcome.entries.map(\.text) == [
            "https://a.example/path/é.png", "https://a.example/😀.png", #"a"b\c"#, "x\u{8}\u{C}\n\r\ty",
        ])
        #expect(outcome.entries[3].url.failureValue != nil)  // control characters are not a URL
    }

    @Test("a string is trimmed like a text line; an empty string is reported as empty")
    func trimmingAndEmpty() throws {
        let outcome = try read(#"["  https://a.example/1.png\n ", "", " \t "]"#)
        #expect(outcome.entries.count == 3)
        #expect(outcome.entries[0].text == "https://a.example/1.png")
        #expect(try outcome.entries[0].url.get().normalized == "https://a.example/1.png")
        #expect(outcome.entries[1].url.failureValue == .empty)
        #expect(outcome.entries[2].url.failureValue == .empty)
    }

    @Test("a lone surrogate makes that string an error entry; the list goes on")
    func loneSurrogates() throws {
        let outcome = try read(#"["http://a.example/\ud83d.png", "http://a.example/\ude00", "http://a.example/\ud83d\u0041", "http://a.example/ok"]"#)
        #expect(outcome.error == nil)
        #expect(outcome.entries.count == 4)
        for entry in outcome.entries.prefix(3) {
            #expect("\(entry.url.failureValue!)".contains("lone UTF-16 surrogate"))
        }
        #expect(outcome.entries[2].text == "http://a.example/A")
        #expect((try? outcome.entries[3].url.get()) != nil)
    }

    @Test("values that are not strings are error entries saying so, skipped whole, nested ones too")
    func nonStrings() throws {
        let json = """
            [1, -2.5e+3, {"a": [1, {"b": "}]\\"", "c": null}], "x": {}},
             [[["https://in.example/1.png"]], []], null, true, false,
            "https://ok.example/1.png", 0.5E-2]
            """
        let outcome = try read(json)
        #expect(outcome.error == nil)
        #expect(outcome.entries.count == 9)
        let kinds = outcome.entries.map { entry -> String in
            guard case .failure(.malformed(_, let reason)) = entry.url else { return "ok" }
            return reason
        }
        #expect(kinds == [
            "not a string but a JSON number", "not a string but a JSON number", #"an object item without a "url" string"#,
            "not a string but a JSON array", "not a string but JSON null", "not a string but a JSON boolean",
            "not a string but a JSON boolean", "ok", "not a string but a JSON number",
        ])
        #expect(outcome.entries.map(\.line) == [1, 1, 1, 2, 2, 2, 2, 3, 3])
        #expect(outcome.entries[2].text == #"{"a": [1, {"b": "}]\"", "c": null}], "x": {}}"#)
        #expect(outcome.entries[3].text == #"[[["https://in.example/1.png"]], []]"#)
        #expect("\(outcome.entries[0].url.failureValue!)" == "not a valid URL: not a string but a JSON number")
    }

    @Test("nesting is followed to 64 levels inside an element and refused beyond")
    func nestingCap() throws {
        let deepest = String(repeating: "[", count: 64) + String(repeating: "]", count: 64)
        let ok = try read("[\(deepest), \"http://a.example/1.png\"]")
        #expect(ok.error == nil)
        #expect(ok.entries.count == 2)

        let tooDeep = String(repeating: "[", count: 65) + String(repeating: "]", count: 65)
        let refused = try read("[\"http://a.example/1.png\",\n\(tooDeep)]")
        #expect(refused.entries.count == 1)
        #expect(refused.malformed?.line == 2)
        #expect(refused.malformed?.reason.contains("nested more than 64") == true)
    }

    @Test("an over-long string is reported with its length and skipped without being held")
    func overlongString() throws {
        let long = "https://a.example/" + String(repeating: "x", count: 100_000)
        let chunkSize = 4096
        let outcome = try read("[\"\(long)\",\n\"https://a.example/ok.png\"]", chunkSize: chunkSize)
        #expect(outcome.error == nil)
        #expect(outcome.entries.count == 2)
        #expect(outcome.entries[0].url.failureValue == .tooLong(length: long.utf8.count, limit: ImageURL.maximumLength))
        #expect(outcome.entries[0].text == String(long.prefix(200)))
        #expect(outcome.entries[1].line == 2)
        #expect((try? outcome.entries[1].url.get()) != nil)
        #expect(outcome.peakBufferedBytes <= chunkSize + ImageURL.maximumLength + 1024)
    }

    @Test("a string exactly at the cap is a URL; one byte more is too long; trailing spaces do not count")
    func capBoundary() throws {
        let base = "https://a.example/"
        let atCap = base + String(repeating: "x", count: ImageURL.maximumLength - base.utf8.count)
        let outcome = try read("[\"\(atCap)\", \"\(atCap)y\", \"\(atCap)      \"]")
        #expect((try? outcome.entries[0].url.get()) != nil)
        #expect(outcome.entries[1].url.failureValue == .tooLong(length: ImageURL.maximumLength + 1, limit: ImageURL.maximumLength))
        #expect((try? outcome.entries[2].url.get()) != nil)
    }

    @Test("items split across reads come out whole, at every read size")
    func chunkBoundaries() throws {
        let json = #"""
            [ "https://a.example/\u00e9\ud83d\ude00\"\\\/.png",
              "https://b.example/é😀.png", {"k": ["v", 1.5e-3, true]},
              "http://c.example/x?y=1&z=2", null ]
            """#
        try LinkListFixture.expectSameAtEveryChunkSize(Array(json.utf8), fileExtension: "json")
        let outcome = try read(json, chunkSize: 1)
        #expect(outcome.entries.map(\.text).first == #"https://a.example/é😀"\/.png"#)
        #expect(outcome.entries[1].text == "https://b.example/é😀.png")
        #expect(outcome.entries.map(\.line) == [1, 2, 2, 3, 3])
    }

    @Test(
        "syntax errors throw with their line, after the entries before them",
        arguments: [
            ("", 1, 0, "the file is empty"),
            ("{\"links\": []}", 1, 0, "unknown member \"links\" in the list's object"),
            ("\"http://a.example/1.png\"", 1, 0, "expected '['"),
            ("[\"http://a.example/1.png\"\n \"http://a.example/2.png\"]", 2, 1, "expected ',' or ']' after an element, found '\"'"),
            ("[\"http://a.example/1.png\",\n\"http://a.example/2.png", 2, 1, "unterminated string"),
            ("[\"http://a.example/1.png\",\n\"http://a.example/2.png\n\"]", 2, 1, "line break inside a string"),
            ("[\"http://a.example/1.png\"]\n\n x", 3, 1, "unexpected 'x' after the end of the array"),
            ("[\"http://a.example/1.png\"] []", 1, 1, "after the end of the array"),
            ("[\"http://a.example/1.png\",]", 1, 1, "expected a value after ','"),
            ("[\"http://a.example/1.png\",\n", 2, 1, "the file ends inside the array"),
            ("[\"http://a.example/1.png\"", 1, 1, "the file ends inside the array"),
            ("[\n\"a\",\ntru]", 3, 1, "invalid literal: expected 'true'"),
            ("[\"a\",\n\"b\\q\"]", 2, 1, "invalid escape '\\q'"),
            ("[\"a\\u12G4\"]", 1, 0, "invalid \\u escape"),
            ("[\"a\", 1.]", 1, 1, "invalid number"),
            ("[\"a\", -]", 1, 1, "invalid number"),
            ("[\"a\", 01]", 1, 2, "expected ',' or ']'"),
            ("[\"a\", {\"k\" 1}]", 1, 1, "expected ':'"),
            ("[\"a\", {1: 2}]", 1, 1, "expected a string key"),
            ("[\"a\", [1 2]]", 1, 1, "expected ',' or ']' in an array"),
            ("[\"a\", 'b']", 1, 1, "expected a string, found '''"),
            ("[\"a\",\n\"tab\there\"]", 2, 1, "control character U+0009"),
        ])
    func syntaxErrors(json: String, line: Int, before: Int, reason: String) throws {
        let outcome = try read(json)
        #expect(outcome.entries.count == before)
        let malformed = try #require(outcome.malformed)
        #expect(malformed.line == line)
        #expect(malformed.reason.contains(reason), "\(malformed.reason)")
    }

    @Test("invalid UTF-8 is a syntax error at its line, after the entries before it")
    func invalidUTF8() throws {
        let bytes = Array("[\n\"http://a.example/1.png\",\n\"http://a.example/".utf8) + [0xC3, 0x28] + Array("\"]".utf8)
        let outcome = try LinkListFixture.read(bytes, fileExtension: "json")
        #expect(outcome.entries.count == 1)
        #expect(outcome.malformed?.line == 3)
        #expect(outcome.malformed?.reason.contains("invalid UTF-8") == true)

        let truncated = try LinkListFixture.read(Array("[\"http://a.example/".utf8) + [0xE2, 0x82], fileExtension: "json")
        #expect(truncated.malformed?.reason.contains("UTF-8") == true)

        let surrogate = try LinkListFixture.read(Array("[\"".utf8) + [0xED, 0xA0, 0x80] + Array("\"]".utf8), fileExtension: "json")
        #expect(surrogate.malformed?.reason.contains("invalid UTF-8") == true)
    }

    @Test("object items: url with key, sha256, pin and priority; unknown members skipped; members in any order")
    func objectItems() throws {
        let digest = String(repeating: "ab", count: 32)
        let json = """
            ["https://a.example/1.png",
             {"url": "https://a.example/2.png?X-Amz-Signature=1", "key": "product-2", "sha256": "\(digest.uppercased())",
              "pin": "24h", "priority": "high", "future": {"nested": [1, {"x": "}"}]}, "refresh": "1d"},
             {"priority": "normal", "url": " https://a.example/3.png "},
             {}]
            """
        let outcome = try read(json)
        #expect(outcome.error == nil)
        #expect(outcome.entries.count == 4)
        #expect(outcome.entries[0].options == .none)
        let second = outcome.entries[1]
        #expect(try second.url.get().normalized == "https://a.example/2.png?X-Amz-Signature=1")
        #expect(second.line == 2)
        var expected = LinkListItemOptions(key: "product-2", sha256: SHA256Digest(hex: digest), pin: .seconds(86400), isHighPriority: true)
        expected.refresh = .after(.seconds(86400))  // a known field since freshness (it was a future one before)
        #expect(second.options == expected)
        #expect(try outcome.entries[2].url.get().normalized == "https://a.example/3.png")
        #expect(outcome.entries[2].options == .none)
        #expect(outcome.entries[3].url.failureValue != nil)
        #expect(outcome.entries[3].text == "{}")
    }

    @Test("a bad member spoils its own item with the reason; the next item is read as usual")
    func badObjectItems() throws {
        let json = """
            [{"url": "https://a.example/1.png", "sha256": "abc"},
             {"url": "https://a.example/2.png", "pin": "soon"},
             {"url": "https://a.example/3.png", "priority": "urgent"},
             {"url": "https://a.example/4.png", "key": 7},
             {"url": 5},
             {"url": "https://a.example/6.png", "key": ""},
             {"url": "https://a.example/7.png", "sha256": "\(String(repeating: "0", count: 64))"}]
            """
        let outcome = try read(json)
        #expect(outcome.error == nil)
        let reasons = outcome.entries.map { entry -> String in
            guard case .failure(.malformed(_, let reason)) = entry.url else { return "ok" }
            return reason
        }
        #expect(reasons.count == 7)
        #expect(reasons[0].hasPrefix("bad sha256: 'abc' is not 64 hexadecimal digits"))
        #expect(reasons[1].hasPrefix("bad pin: "))
        #expect(reasons[2] == "bad priority: 'urgent' is neither high nor normal")
        #expect(reasons[3] == "key is not a string")
        #expect(reasons[4] == #"an object item without a "url" string"#)
        #expect(reasons[5] == "bad key: an empty key")
        #expect(reasons[6] == "ok")
        #expect(outcome.entries[0].text == "https://a.example/1.png")
        #expect(outcome.entries.map(\.line) == [1, 2, 3, 4, 5, 6, 7])
    }

    @Test("an item's key of 1,024 bytes is taken; one byte more spoils that item only, naming the bound, and the next is read")
    func keyLengthBound() throws {
        let limit = LinkListItemOptions.maximumValueBytes
        #expect(limit == 1024)
        let atLimit = String(repeating: "k", count: limit), over = String(repeating: "k", count: limit + 1)
        let json = """
            [{"url": "https://a.example/1.png", "key": "\(atLimit)"},
             {"url": "https://a.example/2.png", "key": "\(over)"},
             {"url": "https://a.example/3.png", "key": "k3"}]
            """
        let outcome = try read(json)
        #expect(outcome.error == nil)
        #expect(outcome.entries.count == 3)
        #expect(outcome.entries[0].options.key == atLimit)
        guard case .failure(.malformed(_, let reason)) = outcome.entries[1].url else {
            Issue.record("a key of \(limit + 1) bytes was taken: \(outcome.entries[1])")
            return
        }
        #expect(reason == "bad key: longer than 1024 bytes", "\(reason)")
        #expect(outcome.entries[2].options.key == "k3")
        #expect(try outcome.entries[2].url.get().normalized == "https://a.example/3.png")
    }

    @Test("broken syntax inside an object item is a malformed list after the items before it")
    func brokenObject() throws {
        let outcome = try read("[\"https://a.example/1.png\", {\"url\": \"https://a.example/2.png\" \"key\": \"k\"}]")
        #expect(outcome.entries.count == 1)
        #expect(outcome.malformed?.reason.contains("expected ',' or '}' in an object") == true)
        let noColon = try read("[{\"url\" \"https://a.example/2.png\"}]")
        #expect(noColon.entries.isEmpty)
        #expect(noColon.malformed?.reason.contains("expected ':'") == true)
    }
}
