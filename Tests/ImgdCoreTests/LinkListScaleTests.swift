import Foundation
import Testing

@testable import ImgdCore

/// A list of a million URLs streams through in bounded memory: the reader's own count of the
/// bytes it held at once stays within one read chunk plus one URL, whatever the list's size.
@Suite("Link lists at scale")
struct LinkListScaleTests {
    /// Entries in the JSON list, as the daemon's largest expected list.
    static let count = 1_000_000
    /// Entries in the text and plist lists: fewer, as the bound does not depend on the count
    /// and a debug build parses a million URLs in several seconds per format.
    static let smallerCount = 200_000

    /// Writes `header`, one `item(i)` a line for i in 0..<count, then `footer`, in batches, so
    /// the test itself never holds the whole file either.
    private func writeList(
        count: Int = Self.count, fileExtension: String, header: String, footer: String, item: (Int) -> String
    ) throws -> String {
        let path = FileManager.default.temporaryDirectory
            .appendingPathComponent("list-\(UUID().uuidString).\(fileExtension)").path
        #expect(FileManager.default.createFile(atPath: path, contents: Data(header.utf8)))
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        defer { try? handle.close() }
        try handle.seekToEnd()
        var batch = ""
        for index in 0..<count {
            batch += item(index)
            if index % 10_000 == 9_999 {
                try handle.write(contentsOf: Data(batch.utf8))
                batch = ""
            }
        }
        try handle.write(contentsOf: Data((batch + footer).utf8))
        return path
    }

    /// Reads the list at `path` to the end, counting URLs without keeping them.
    private func readAll(_ path: String) throws -> (urls: Int, lastLine: Int, peak: Int) {
        var reader = try LinkListReader(path: path)
        var urls = 0
        var lastLine = 0
        while let entry = try reader.next() {
            if case .success = entry.url { urls += 1 }
            lastLine = entry.line
        }
        return (urls, lastLine, reader.peakBufferedBytes)
    }

    /// The bound: the read buffer, one URL-sized string, and a little for allocation rounding
    /// and the 200 bytes kept to show a rejected item.
    private var bound: Int { LinkListReader.chunkSize + ImageURL.maximumLength + 1024 }

    @Test("a JSON list of 1,000,000 URLs is read to the end in bounded memory")
    func millionJSON() throws {
        let path = try writeList(fileExtension: "json", header: "[\n", footer: "\"http://z.example/last\"\n]\n") {
            "\"http://h\($0 % 97).example/\($0).png\",\n"
        }
        defer { try? FileManager.default.removeItem(atPath: path) }
        let result = try readAll(path)
        #expect(result.urls == Self.count + 1)
        #expect(result.lastLine == Self.count + 2)
        #expect(result.peak <= bound, "peak \(result.peak) bytes")
    }

    @Test("a plist of 200,000 URLs is read to the end in bounded memory")
    func manyPlist() throws {
        let path = try writeList(
            count: Self.smallerCount, fileExtension: "plist", header: "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<plist version=\"1.0\">\n<array>\n",
            footer: "</array>\n</plist>\n"
        ) { "<string>http://h\($0 % 97).example/\($0).png?a=1&amp;b=2</string>\n" }
        defer { try? FileManager.default.removeItem(atPath: path) }
        let result = try readAll(path)
        #expect(result.urls == Self.smallerCount)
        #expect(result.lastLine == Self.smallerCount + 3)
        #expect(result.peak <= bound, "peak \(result.peak) bytes")
    }

    @Test("a text list of 200,000 URLs is read to the end in bounded memory")
    func manyText() throws {
        let path = try writeList(count: Self.smallerCount, fileExtension: "txt", header: "# pin: 1h\n", footer: "") {
            "http://h\($0 % 97).example/\($0).png\n"
        }
        defer { try? FileManager.default.removeItem(atPath: path) }
        let result = try readAll(path)
        #expect(result.urls == Self.smallerCount)
        #expect(result.lastLine == Self.smallerCount + 1)
        // Text keeps a partial line (up to the URL cap) in its read buffer across reads.
        #expect(result.peak <= bound, "peak \(result.peak) bytes")
    }
}
