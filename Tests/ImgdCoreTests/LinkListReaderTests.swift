import Foundation
import ImgdCore
import ImgdTestSupport
import Synchronization
import Testing

@Suite("Link lists", .offThePool)
struct LinkListReaderTests {
    private func entries(of text: [UInt8]) throws -> [LinkListEntry] {
        let scratch = try ScratchFolder("imgd-list")
        let path = scratch.path("list.txt")
        #expect(FileManager.default.createFile(atPath: path, contents: Data(text)))
        defer { scratch.remove() }
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

    @Test("byteLimit: the reader stops at the limit, as if the file ended there (a line cut by it is the last entry)")
    func byteLimit() throws {
        let scratch = try ScratchFolder("imgd-list")
        let path = scratch.path("list.txt")
        let text = (1...50_000).map { "http://a.example/\($0).png" }.joined(separator: "\n") + "\n"
        #expect(FileManager.default.createFile(atPath: path, contents: Data(text.utf8)))
        defer { scratch.remove() }
        // The limit falls inside line 10,001 ("http://a.example/10001.png"), after "http://a.exa".
        let limit = (1...10_000).reduce(0) { $0 + "http://a.example/\($1).png\n".utf8.count } + 12
        var reader = try LinkListReader(fileDescriptor: open(path, O_RDONLY), path: path, byteLimit: limit)
        var found: [LinkListEntry] = []
        while let entry = try reader.next() { found.append(entry) }
        #expect(found.count == 10_001)
        #expect(found[9_999].text == "http://a.example/10000.png")
        #expect(found.last?.text == "http://a.exa")
    }

    @Test("isInterrupted stops a read inside one endless line at the next 64 KiB, with .interrupted")
    func interrupted() throws {
        let scratch = try ScratchFolder("imgd-list")
        let path = scratch.path("list.txt")
        // 8 MiB without a newline: the parser returns no entry while it skips it.
        #expect(FileManager.default.createFile(atPath: path, contents: Data(repeating: 0x61, count: 8 << 20)))
        defer { scratch.remove() }
        let reads = Atomic<Int>(0)
        var reader = try LinkListReader(fileDescriptor: open(path, O_RDONLY), path: path) {
            reads.add(1, ordering: .relaxed).newValue > 10
        }
        #expect(throws: LinkListError.interrupted(path: path)) { _ = try reader.next() }
        #expect(reads.load(ordering: .relaxed) == 11)
        // Stays broken.
        #expect(throws: LinkListError.interrupted(path: path)) { _ = try reader.next() }
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
