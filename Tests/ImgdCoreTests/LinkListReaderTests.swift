import Foundation
import ImgdCore
import Testing

@Suite("Link lists")
struct LinkListReaderTests {
    private func entries(of text: [UInt8]) throws -> [LinkListEntry] {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("list-\(UUID().uuidString).txt").path
        #expect(FileManager.default.createFile(atPath: path, contents: Data(text)))
        defer { try? FileManager.default.removeItem(atPath: path) }
        var reader = try LinkListReader(path: path)
        var result: [LinkListEntry] = []
        while let entry = try reader.next() { result.append(entry) }
        return result
    }

    @Test("URLs, comments, blank lines, CRLF, a BOM and bad lines, with their line numbers")
    func mixedList() throws {
        let text = "\u{FEFF}# my list\r\nhttp://a.example/1.png\r\n\r\n   \n  https://b.example/2.jpg  \nftp://c.example/3.png\nnot a url\n# end\nhttp://d.example/4.gif"
        let found = try entries(of: Array(text.utf8))
        #expect(found.map(\.line) == [2, 5, 6, 7, 9])
        #expect(found.compactMap { try? $0.url.get().normalized } == [
            "http://a.example/1.png", "https://b.example/2.jpg", "http://d.example/4.gif",
        ])
        #expect(found[2].text == "ftp://c.example/3.png")
        #expect(found[2].url.failureValue == .unsupportedScheme("ftp"))
        #expect(found[3].url.failureValue != nil)
    }

    @Test("invalid UTF-8 on one line is reported; the lines around it survive")
    func invalidUTF8() throws {
        let bytes = Array("http://a.example/1.png\n".utf8) + [0x68, 0xFF, 0xFE, 0x0A] + Array("http://a.example/2.png\n".utf8)
        let found = try entries(of: bytes)
        #expect(found.count == 3)
        #expect("\(found[1].url.failureValue!)".contains("UTF-8"))
        #expect(found[2].line == 3)
        #expect((try? found[2].url.get()) != nil)
    }

    @Test("an over-long line is cut, reported, and does not swallow the next line")
    func overlongLine() throws {
        let long = "http://a.example/" + String(repeating: "x", count: 100_000)
        let found = try entries(of: Array((long + "\nhttp://a.example/ok.png\n").utf8))
        #expect(found.count == 2)
        guard case .failure(.tooLong(_, let limit)) = found[0].url else {
            Issue.record("expected tooLong, got \(found[0].url)")
            return
        }
        #expect(limit == ImageURL.maximumLength)
        #expect(found[0].text.count <= 200)
        #expect(found[1].line == 2)
    }

    @Test("a list larger than the read buffer streams through with every line counted")
    func manyLines() throws {
        let text = (1...20_000).map { "http://a.example/\($0).png" }.joined(separator: "\n")
        let found = try entries(of: Array(text.utf8))
        #expect(found.count == 20_000)
        #expect(found.last?.line == 20_000)
        #expect(found.allSatisfy { (try? $0.url.get()) != nil })
    }

    @Test("a missing file is an error naming the path")
    func missingFile() {
        #expect(throws: LinkListError.cannotOpen(path: "/nonexistent/list.txt", errno: ENOENT)) {
            _ = try LinkListReader(path: "/nonexistent/list.txt")
        }
    }
}

extension Result {
    var failureValue: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
