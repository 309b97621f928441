import Foundation
import ImgdTestSupport
import Testing

@testable import ImgdCore

@Suite("Link lists as text: the pin header, read sizes, memory", .offThePool)
struct LinkListTextTests {
    private func read(_ text: String, chunkSize: Int = LinkListReader.chunkSize) throws -> LinkListFixture.Outcome {
        try LinkListFixture.read(text, fileExtension: "txt", chunkSize: chunkSize)
    }

    @Test("a '# pin:' comment in the header sets the pin, after the first next()")
    func pinHeader() throws {
        let path = try LinkListFixture.write(Array("# my list\n\n#   PIN :  24h \r\n# more words\nhttp://a.example/1.png\n".utf8), fileExtension: "txt")
        defer { try? FileManager.default.removeItem(atPath: path) }
        var reader = try LinkListReader(path: path)
        #expect(reader.pin == nil)  // the header is read lazily
        let first = try reader.next()
        #expect(first?.line == 5)
        #expect(reader.pin == .seconds(86_400))
        #expect(try reader.next() == nil)
        #expect(reader.pin == .seconds(86_400))
    }

    @Test(
        "pin values as Duration.parsing reads them; a later header line overrides an earlier one",
        arguments: [
            ("#pin:90m\nhttp://a.example/1.png", Duration.seconds(5400)),
            ("# pin: 1.5h\n", .seconds(5400)),
            ("# Pin: 7d\n# pin: 30s\nhttp://a.example/1.png", .seconds(30)),
            ("\u{FEFF}# pin: 500ms\nhttp://a.example/1.png", .milliseconds(500)),
        ])
    func pinValues(text: String, expected: Duration) throws {
        let outcome = try read(text)
        #expect(outcome.error == nil)
        #expect(outcome.pin == expected)
    }

    @Test("comments that only look like a pin are comments")
    func notPins() throws {
        for text in ["# pinned: 1h\nhttp://a.example/1.png", "# pin 1h\nhttp://a.example/1.png", "# spin: 1h\n", "## pin: 1h\n"] {
            let outcome = try read(text)
            #expect(outcome.error == nil, "\(text)")
            #expect(outcome.pin == nil, "\(text)")
        }
    }

    @Test("a pin after the first URL line is an ordinary comment, even a bad one")
    func pinAfterFirstURL() throws {
        let outcome = try read("# list\nnot a url\n# pin: 1h\nhttp://a.example/1.png\n# pin: forever\n")
        #expect(outcome.error == nil)
        #expect(outcome.pin == nil)
        #expect(outcome.entries.map(\.line) == [2, 4])
    }

    @Test("a bad pin value throws with its line, before any entry")
    func badPin() throws {
        let outcome = try read("# list\n# pin: forever\nhttp://a.example/1.png\n")
        #expect(outcome.entries.isEmpty)
        let malformed = try #require(outcome.malformed)
        #expect(malformed.line == 2)
        #expect(malformed.reason.contains("bad '# pin:' header"))
        #expect(malformed.reason.contains("'forever'"))
        #expect(try read("# pin:\n").malformed?.line == 1)
        #expect(try read("# pin: -1h\n").malformed?.line == 1)
    }

    @Test("lines split across reads come out whole, at every read size")
    func chunkBoundaries() throws {
        let long = "http://a.example/" + String(repeating: "x", count: 9000)
        let text = "\u{FEFF}# pin: 1h\r\nhttp://a.example/1.png\r\n\n  https://b.example/é.png  \n\(long)\nnot a url\n# c\nhttp://d.example/4.gif"
        try LinkListFixture.expectSameAtEveryChunkSize(Array(text.utf8), fileExtension: "txt")
        let outcome = try read(text, chunkSize: 3)
        #expect(outcome.entries.map(\.line) == [2, 4, 5, 6, 8])
        #expect(outcome.pin == .seconds(3600))
        #expect(outcome.entries[2].url.failureValue == .tooLong(length: long.utf8.count, limit: ImageURL.maximumLength))
    }

    @Test("whitespace around a URL does not count towards the cap, however much of it there is")
    func whitespaceBeyondTheBuffer() throws {
        let spaces = String(repeating: " ", count: 20_000)
        let text = "\(spaces)http://a.example/1.png\(spaces)\r\n\(spaces)\nhttp://a.example/\(spaces)x\n"
        try LinkListFixture.expectSameAtEveryChunkSize(Array(text.utf8), fileExtension: "txt")
        let outcome = try read(text, chunkSize: 64)
        #expect(outcome.entries.map(\.line) == [1, 3])
        #expect(try outcome.entries[0].url.get().normalized == "http://a.example/1.png")
        #expect(outcome.entries[1].url.failureValue == .tooLong(length: 20_018, limit: ImageURL.maximumLength))
        #expect(outcome.entries[1].text == "http://a.example/" + String(repeating: " ", count: 183))
    }

    @Test("an over-long line holds no more than the read buffer and one line")
    func overlongLineMemory() throws {
        let chunkSize = 4096
        let long = "http://a.example/" + String(repeating: "x", count: 1_000_000)
        let outcome = try read(long + "\nhttp://a.example/ok.png\n" + long, chunkSize: chunkSize)
        #expect(outcome.entries.count == 3)
        #expect(outcome.entries.map(\.line) == [1, 2, 3])
        #expect(outcome.peakBufferedBytes <= chunkSize + ImageURL.maximumLength + 1024)
    }
}
