import Foundation
import ImgdTestSupport
@testable import ImgdDaemon
import ImgdProtocol
import NIOCore
import Testing

@Suite("Control socket: JSON values", .offThePool)
struct ControlJSONTests {
    @Test(
        "values are written back as compact JSON with sorted keys and unescaped slashes",
        arguments: [
            ("1", "1"),
            ("1.5", "1.5"),
            ("-0.25", "-0.25"),
            ("1e3", "1000.0"),
            ("1E-7", "1e-07"),
            ("0", "0"),
            ("-0", "0"),
            ("9223372036854775807", "9223372036854775807"),
            ("-9223372036854775808", "-9223372036854775808"),
            ("\"x\"", "\"x\""),
            ("null", "null"),
            ("true", "true"),
            ("false", "false"),
            ("[1,{\"a\":true}]", "[1,{\"a\":true}]"),
            (" { \"z\" : 1 , \"a\" : [ ] } ", "{\"a\":[],\"z\":1}"),
            ("{\"b\":1,\"a\":2,\"a\":3}", "{\"a\":3,\"b\":1}"),
            // By UTF-8 bytes: upper case before lower, a prefix first, non-ASCII last.
            ("{\"ä\":1,\"b\":2,\"aa\":3,\"a\":4,\"Z\":5,\"\":6}", "{\"\":6,\"Z\":5,\"a\":4,\"aa\":3,\"b\":2,\"ä\":1}"),
            ("\"a/b\\/c\"", "\"a/b/c\""),
            ("\"q\\\"b\\\\n\\n\\t\\r\\b\\f\"", "\"q\\\"b\\\\n\\n\\t\\r\\b\\f\""),
            ("\"\\u0001\\u001f\"", "\"\\u0001\\u001f\""),
            ("\"h\\u00e9llo \\u2603 \\ud83d\\ude00\"", "\"héllo ☃ 😀\""),
            ("\"héllo ☃ 😀\"", "\"héllo ☃ 😀\""),
            ("\"\\u2028\"", "\"\u{2028}\""),
        ])
    func roundTrip(input: String, output: String) throws {
        let value = try JSONValue(parsing: input)
        #expect(value.jsonText == output)
        #expect(try JSONValue(parsing: output) == value)
    }

    @Test("integers stay exact within 64 bits; other numbers are doubles")
    func numberKinds() throws {
        #expect(try JSONValue(parsing: "9223372036854775807") == .int(.max))
        #expect(try JSONValue(parsing: "-9223372036854775808") == .int(.min))
        #expect(try JSONValue(parsing: "9223372036854775808") == .double(9_223_372_036_854_775_808))
        #expect(try JSONValue(parsing: "1.0") == .double(1))
        #expect(try JSONValue(parsing: "12345678901234567") == .int(12_345_678_901_234_567))
        #expect(try JSONValue(parsing: "0.1").jsonText == "0.1")
        #expect(JSONValue.double(.nan).jsonText == "null")
        #expect(JSONValue(UInt64.max) == .double(Double(UInt64.max)))
        #expect(JSONValue(42) == .int(42))
    }

    @Test(
        "malformed text is refused with where and why",
        arguments: [
            "", "   ", "{", "[1,]", "{\"a\":1,}", "{'a':1}", "{\"a\" 1}", "01", "-", "1.", "1e", "+1", ".5",
            "NaN", "Infinity", "tru", "nul", "\"abc", "\"\\x\"", "\"\\u12\"", "\"\\ud800\"", "\"\\udc00\"",
            "\"\\ud800\\u0041\"", "\"a\u{01}b\"", "[1] 2", "{} {}", "1e400", "{\"a\":}", "[1 2]",
        ])
    func malformed(text: String) {
        #expect(throws: JSONParseError.self) { try JSONValue(parsing: text) }
    }

    @Test("invalid UTF-8 in a string is refused")
    func invalidUTF8() throws {
        var buffer = ByteBuffer(string: "{\"cmd\":\"")
        buffer.writeBytes([0xFF, 0xFE])
        buffer.writeString("\"}")
        #expect(throws: JSONParseError.self) { try JSONValue(parsing: buffer) }
    }

    @Test("nesting beyond the limit is refused, within it accepted")
    func depth() throws {
        let deep = String(repeating: "[", count: 65) + String(repeating: "]", count: 65)
        #expect(throws: JSONParseError.self) { try JSONValue(parsing: deep) }
        let fine = String(repeating: "[", count: 64) + String(repeating: "]", count: 64)
        #expect(try JSONValue(parsing: fine).jsonText == fine)
        let deepObjects = String(repeating: "{\"a\":", count: 1000) + "1" + String(repeating: "}", count: 1000)
        #expect(throws: JSONParseError.self) { try JSONValue(parsing: deepObjects) }
    }

    @Test("the error says where the text went wrong")
    func errorOffset() {
        do {
            _ = try JSONValue(parsing: "{\"a\":1 \"b\":2}")
            Issue.record("parsed")
        } catch {
            #expect(error.offset == 7)
            #expect(error.description == "invalid JSON at byte 7: expected ',' or '}'")
        }
    }

    @Test("Codable: through Foundation's encoder and decoder")
    func codable() throws {
        let value: JSONValue = ["id": [1, 1.5, "x", nil, true], "nested": ["a": ["b": "c/d"]], "big": .int(.max)]
        let data = try JSONEncoder().encode(value)
        let decoded = try JSONDecoder().decode(JSONValue.self, from: data)
        #expect(decoded == value)
    }

    @Test("a reply line is the envelope with sorted keys, the result or error inside, and a newline")
    func replyLines() throws {
        let result: JSONValue = ["path": "/c/a b", "bytes": 3, "note": "say \"hi\""]
        let success = ControlLine.reply(id: ["n": 1, "a": "x"], .success(result))
        #expect(String(buffer: success) == "{\"id\":{\"a\":\"x\",\"n\":1},\"ok\":true,\"result\":{\"bytes\":3,\"note\":\"say \\\"hi\\\"\",\"path\":\"/c/a b\"}}\n")
        let failure = ControlLine.error(.badRequest("a \"cmd\"\nis missing"), id: 7)
        #expect(String(buffer: failure) == "{\"error\":{\"code\":\"bad_request\",\"message\":\"a \\\"cmd\\\"\\nis missing\"},\"id\":7,\"ok\":false}\n")
        // Each is one JSON object that reads back as the same envelope.
        let parsed = try JSONValue(parsing: String(buffer: failure))
        #expect(parsed == ["error": ["code": "bad_request", "message": "a \"cmd\"\nis missing"], "id": 7, "ok": false])
        #expect(try JSONValue(parsing: String(buffer: success)) == ["id": ["n": 1, "a": "x"], "ok": true, "result": result])
    }

    @Test("accessors and literals")
    func accessors() throws {
        let value: JSONValue = ["s": "text", "n": 3, "d": 2.5, "b": false, "a": ["x"], "o": ["k": nil]]
        #expect(value["s"]?.stringValue == "text")
        #expect(value["n"]?.intValue == 3)
        #expect(value["d"]?.intValue == nil)
        #expect(value["d"]?.doubleValue == 2.5)
        #expect(value["b"]?.boolValue == false)
        #expect(value["a"]?.arrayValue == ["x"])
        #expect(value["o"]?["k"]?.isNull == true)
        #expect(value["missing"] == nil)
        #expect(JSONValue.double(4).intValue == 4)
        #expect(JSONValue(["a", "b"]).jsonText == "[\"a\",\"b\"]")
        #expect(value.description == value.jsonText)
    }
}
