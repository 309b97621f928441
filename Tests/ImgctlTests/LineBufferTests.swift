import ImgdTestSupport
import Testing

@testable import ImgdClient

@Suite("Line buffer", .offThePool)
struct LineBufferTests {
    func append(_ buffer: inout LineBuffer, _ text: String) {
        Array(text.utf8).withUnsafeBytes { buffer.append($0) }
    }

    @Test("lines fed one byte at a time come out whole; blank lines are skipped")
    func dripFeed() {
        var buffer = LineBuffer(limit: 100)
        var lines: [String] = []
        for character in "{\"a\":1}\n\n  \n{\"b\":2}\n{\"c\"" {
            append(&buffer, String(character))
            while let line = buffer.nextLine() { lines.append(String(decoding: line, as: UTF8.self)) }
        }
        #expect(lines == [#"{"a":1}"#, #"{"b":2}"#])
        #expect(buffer.hasPartialLine)
    }

    @Test("many lines in one read")
    func manyAtOnce() {
        var buffer = LineBuffer(limit: 100)
        append(&buffer, (1...50).map { "line \($0)\n" }.joined())
        var count = 0
        while buffer.nextLine() != nil { count += 1 }
        #expect(count == 50)
        #expect(!buffer.hasPartialLine)
    }

    @Test("a partial line over the limit is flagged; one at the limit is not")
    func limit() {
        var buffer = LineBuffer(limit: 10)
        append(&buffer, String(repeating: "x", count: 10))
        #expect(buffer.nextLine() == nil)
        #expect(!buffer.isOverLimit)
        append(&buffer, "x")
        #expect(buffer.nextLine() == nil)
        #expect(buffer.isOverLimit)
    }
}
