import Foundation
import ImgdTestSupport
import Testing

@testable import ImgdCore

@Suite("Link list formats and opening", .offThePool)
struct LinkListFormatTests {
    @Test(
        "the format follows the file name's extension; anything else is text",
        arguments: [
            ("list.json", LinkListFormat.json), ("LIST.JSON", .json), ("/spool/a.b/list.plist", .plist),
            ("x.Plist", .plist), ("list.txt", .text), ("list", .text), ("/spool/a.json/list", .text),
            ("list.json.txt", .text), ("list.jsonl", .text), ("", .text),
        ])
    func formatFromName(name: String, expected: LinkListFormat) {
        #expect(LinkListFormat(fileName: name) == expected)
    }

    @Test("the reader picks the format from the path, and an explicit format wins")
    func readerFormat() throws {
        let json = #"["http://a.example/1.png"]"#
        let asJSON = try LinkListFixture.read(Array(json.utf8), fileExtension: "json")
        #expect(asJSON.entries.map(\.text) == ["http://a.example/1.png"])

        let path = try LinkListFixture.write(Array(json.utf8), fileExtension: "txt")
        defer { try? FileManager.default.removeItem(atPath: path) }
        var asText = try LinkListReader(path: path)
        #expect(asText.format == .text)
        #expect(try asText.next()?.url.failureValue != nil)  // the whole line is not a URL
        var forced = try LinkListReader(path: path, format: .json)
        #expect(forced.format == .json)
        #expect(try forced.next()?.url.get().normalized == "http://a.example/1.png")
    }

    @Test("a reader takes over an open descriptor, chooses the format by the path given, and closes it")
    func fromDescriptor() throws {
        let path = try LinkListFixture.write(Array("[\n\"http://a.example/1.png\", 7]".utf8), fileExtension: "json")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let fd = try LinkListFixture.highDescriptor(open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC), slot: 1)
        do {
            var reader = try LinkListReader(fileDescriptor: fd, path: "/spool/named.json")
            #expect(reader.format == .json)
            let first = try reader.next()
            #expect(first?.line == 2)
            #expect(try first?.url.get().normalized == "http://a.example/1.png")
            #expect(try reader.next()?.url.failureValue == .malformed("7", reason: "not a string but a JSON number"))
            #expect(try reader.next() == nil)
        }
        // The reader is gone, and the descriptor with it.
        #expect(fcntl(fd, F_GETFD) == -1)
    }

    @Test("a folder is refused, by path or by descriptor (which is closed)")
    func folder() throws {
        let folder = FileManager.default.temporaryDirectory.path
        #expect(throws: LinkListError.cannotOpen(path: folder, errno: EISDIR)) {
            _ = try LinkListReader(path: folder)
        }
        let fd = try LinkListFixture.highDescriptor(open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC), slot: 2)
        #expect(throws: LinkListError.cannotOpen(path: folder, errno: EISDIR)) {
            _ = try LinkListReader(fileDescriptor: fd, path: folder)
        }
        #expect(fcntl(fd, F_GETFD) == -1)
    }

    @Test("a malformed list's error names the file and line")
    func malformedDescription() {
        let error = LinkListError.malformed(path: "/spool/a.json", line: 3, reason: "expected ',' or ']' after an element, found '}'")
        #expect(error.description == "/spool/a.json:3: malformed link list: expected ',' or ']' after an element, found '}'")
    }
}

/// Writes link lists to temporary files and reads them back, to the end or to the first error.
enum LinkListFixture {
    /// What reading a list gave: every entry returned, then the error that stopped it, if any.
    struct Outcome {
        var entries: [LinkListEntry]
        var error: LinkListError?
        var peakBufferedBytes: Int
        var pin: Duration?
        var readyBy: ReadyBy?

        /// The `.malformed` error's line and reason, or nil.
        var malformed: (line: Int, reason: String)? {
            guard case .malformed(_, let line, let reason) = error else { return nil }
            return (line, reason)
        }
    }

    /// `fd` moved to a high, unused number, so that checking it is closed afterwards cannot be
    /// fooled by a test running alongside that opens a file and gets the lowest free number.
    /// Each test passes its own `slot`: a band of 100 numbers just under the open-file limit,
    /// far above what the other tests use (a thousand connections or so). `F_DUPFD` picks a free
    /// number atomically: `dup2` onto one found free a moment before could close another test's.
    static func highDescriptor(_ fd: Int32, slot: Int32) throws -> Int32 {
        #expect(fd >= 0)
        var limit = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        let start = Int32(clamping: limit.rlim_cur) - 100 * (slot + 1)
        let moved = fcntl(fd, F_DUPFD_CLOEXEC, start)
        close(fd)
        try #require(moved >= start, "no free descriptor from \(start): \(String(cString: strerror(errno)))")
        return moved
    }

    /// A new temporary file holding `contents`, named `list-UUID.EXT`.
    static func write(_ contents: [UInt8], fileExtension: String) throws -> String {
        let path = try ScratchFolder("imgd-list").path("list.\(fileExtension)")
        try Data(contents).write(to: URL(fileURLWithPath: path))
        return path
    }

    /// Reads `contents` as a `.EXT` file with `chunkSize`-byte reads, until the end or an error.
    static func read(
        _ contents: [UInt8], fileExtension: String, chunkSize: Int = LinkListReader.chunkSize
    ) throws -> Outcome {
        let path = try write(contents, fileExtension: fileExtension)
        defer { try? FileManager.default.removeItem(atPath: path) }
        var reader = try LinkListReader(path: path, format: nil, chunkSize: chunkSize)
        var outcome = Outcome(entries: [], error: nil, peakBufferedBytes: 0)
        do {
            while let entry = try reader.next() { outcome.entries.append(entry) }
        } catch {
            outcome.error = error
            // A broken list stays broken.
            #expect(throws: error) { _ = try reader.next() }
        }
        outcome.peakBufferedBytes = reader.peakBufferedBytes
        outcome.pin = reader.pin
        outcome.readyBy = reader.readyBy
        return outcome
    }

    /// Reads `text` as a `.EXT` file.
    static func read(_ text: String, fileExtension: String, chunkSize: Int = LinkListReader.chunkSize) throws -> Outcome {
        try read(Array(text.utf8), fileExtension: fileExtension, chunkSize: chunkSize)
    }

    /// The same list read with many small read sizes must give what one big read gives: items
    /// split across reads (a string, an escape, a surrogate pair, an entity, a tag) are whole.
    static func expectSameAtEveryChunkSize(
        _ contents: [UInt8], fileExtension: String, sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let reference = try read(contents, fileExtension: fileExtension)
        for chunkSize in [1, 2, 3, 5, 7, 11, 16, 64] {
            let small = try read(contents, fileExtension: fileExtension, chunkSize: chunkSize)
            #expect(small.entries.map(\.line) == reference.entries.map(\.line), "chunk \(chunkSize)", sourceLocation: sourceLocation)
            #expect(small.entries.map(\.text) == reference.entries.map(\.text), "chunk \(chunkSize)", sourceLocation: sourceLocation)
            #expect(
                small.entries.map { "\($0.url)" } == reference.entries.map { "\($0.url)" }, "chunk \(chunkSize)",
                sourceLocation: sourceLocation)
            #expect(small.error == reference.error, "chunk \(chunkSize)", sourceLocation: sourceLocation)
        }
    }
}
