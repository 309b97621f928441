import Foundation
import ImgdTestSupport
import Testing

@testable import ImgdCore

/// A list of a million URLs streams through in bounded memory, measured where memory is real:
/// the process's resident set. Each read runs in a child process of its own (an exit test), so
/// no other test's allocations share the figure; the child writes the list, resets its peak
/// resident set (`/proc/self/clear_refs`), reads the list to the end, and compares its peak
/// (`VmHWM`) with its resident set before the read. The reader's own count of the bytes it
/// held at once is checked too. A control run reads the same list whole into memory and must
/// cross the same margin, so the margin is shown to catch an unbounded read.
///
/// Each exit test runs ``offThePool(isolation:_:)``: Swift Testing waits for the child's output with
/// blocking reads in tasks of its own, which on the cooperative pool held both of its threads
/// for as long as the child ran (tens of seconds in a debug build on a loaded machine).
/// Serialized: each child is a debug build parsing up to a million lines at full speed; four at
/// once on 2 cores starved the rest of the suite (connection-close deadlines of 30 s missed in CI).
@Suite("Link lists at scale", .serialized, .timeLimit(.minutes(5)), .offThePool)
struct LinkListScaleTests {
    /// Entries in the JSON list, as the daemon's largest expected list.
    static let count = 1_000_000
    /// Entries in the text and plist lists: fewer, as the bound does not depend on the count
    /// and a debug build parses a million URLs in several seconds per format.
    static let smallerCount = 200_000
    /// The most the resident set may grow while a list is read: 8 MiB. The JSON list is about
    /// 36 MB and the plist and text lists 11 and 7 MB, so holding any of them whole crosses it;
    /// the reader's buffer (64 KiB and one URL) and the allocator's slack stay far below.
    static let residentMargin = 8 << 20

    /// One list: its format, its lines, and what reading it must give.
    enum Shape: String, Sendable, CaseIterable {
        case json, plist, text

        var count: Int { self == .json ? LinkListScaleTests.count : LinkListScaleTests.smallerCount }
        var fileExtension: String { self == .text ? "txt" : rawValue }
        var header: String {
            switch self {
            case .json: "[\n"
            case .plist: "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<plist version=\"1.0\">\n<array>\n"
            case .text: "# pin: 1h\n"
            }
        }
        var footer: String {
            switch self {
            case .json: "\"http://z.example/last\"\n]\n"
            case .plist: "</array>\n</plist>\n"
            case .text: ""
            }
        }
        func item(_ index: Int) -> String {
            switch self {
            case .json: "\"http://h\(index % 97).example/\(index).png\",\n"
            case .plist: "<string>http://h\(index % 97).example/\(index).png?a=1&amp;b=2</string>\n"
            case .text: "http://h\(index % 97).example/\(index).png\n"
            }
        }
        /// URLs in the list: JSON has one more after the loop, as its last item.
        var urls: Int { self == .json ? count + 1 : count }
        /// The line of the last entry.
        var lastLine: Int {
            switch self {
            case .json: count + 2
            case .plist: count + 3
            case .text: count + 1
            }
        }
    }

    /// Writes the list in batches, so the writer never holds the whole file either.
    static func writeList(_ shape: Shape) throws -> String {
        let path = try ScratchFolder("imgd-list").path("list.\(shape.fileExtension)")
        guard FileManager.default.createFile(atPath: path, contents: Data(shape.header.utf8)) else {
            throw CocoaError(.fileWriteUnknown)
        }
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        defer { try? handle.close() }
        try handle.seekToEnd()
        var batch = ""
        for index in 0..<shape.count {
            batch += shape.item(index)
            if index % 10_000 == 9_999 {
                try handle.write(contentsOf: Data(batch.utf8))
                batch = ""
            }
        }
        try handle.write(contentsOf: Data((batch + shape.footer).utf8))
        return path
    }

    /// Why the resident-set tests skip under AddressSanitizer: it keeps freed memory in
    /// quarantine (256 MB by default) before reuse, so the read's garbage stays resident.
    static let quarantine: Comment = "AddressSanitizer's quarantine keeps freed memory resident"

    /// The reader's bound: the read buffer, one URL-sized string, and a little for allocation
    /// rounding and the 200 bytes kept to show a rejected item.
    static var bound: Int { LinkListReader.chunkSize + ImageURL.maximumLength + 1024 }

    /// A figure of `/proc/self/status` in bytes (`VmRSS`, `VmHWM`); 0 if absent.
    static func status(_ field: String) -> Int {
        guard let text = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
        for line in text.split(separator: "\n") where line.hasPrefix(field + ":") {
            // "VmHWM:\t   12345 kB": a tab, spaces, the figure in KiB.
            let kilobytes = line.dropFirst(field.count + 1).split(whereSeparator: { $0 == " " || $0 == "\t" }).first.flatMap { Int($0) } ?? 0
            return kilobytes * 1024
        }
        return 0
    }

    /// Run in the child: writes the list, reads it (streaming, or whole when `unbounded`), and
    /// exits 0 when every figure is within its bound, 1 with the figures on stderr otherwise.
    static func readInChild(_ shape: Shape, unbounded: Bool) -> Never {
        var problems: [String] = []
        do {
            let path = try writeList(shape)
            defer { try? FileManager.default.removeItem(atPath: path) }
            // From here the peak is the read's own: "5" resets VmHWM to the current VmRSS.
            let reset = (try? "5".write(toFile: "/proc/self/clear_refs", atomically: false, encoding: .utf8)) != nil
            let before = status(reset ? "VmRSS" : "VmHWM")
            var held: [LinkListEntry] = []
            var whole: Data?
            if unbounded {
                // What a reader that does not stream would do: the file in memory, every entry kept.
                whole = try Data(contentsOf: URL(fileURLWithPath: path))
            }
            var reader = try LinkListReader(path: path)
            var urls = 0
            var lastLine = 0
            while let entry = try reader.next() {
                if case .success = entry.url { urls += 1 }
                lastLine = entry.line
                if unbounded { held.append(entry) }
            }
            let peak = status("VmHWM")
            let grown = peak - before
            withExtendedLifetime((held, whole)) {}
            if urls != shape.urls { problems.append("\(urls) URLs read, not \(shape.urls)") }
            if lastLine != shape.lastLine { problems.append("last line \(lastLine), not \(shape.lastLine)") }
            if !unbounded, reader.peakBufferedBytes > bound {
                problems.append("the reader held \(reader.peakBufferedBytes) bytes at once, over \(bound)")
            }
            if before == 0 || peak == 0 { problems.append("no VmRSS/VmHWM in /proc/self/status") }
            if grown > residentMargin {
                problems.append("the resident set grew by \(grown) bytes (from \(before) to a peak of \(peak)), over \(residentMargin)")
            }
        } catch {
            problems.append("\(error)")
        }
        if !problems.isEmpty {
            FileHandle.standardError.write(Data((problems.joined(separator: "; ") + "\n").utf8))
            exit(1)
        }
        exit(0)
    }

    @Test("a JSON list of 1,000,000 URLs is read to the end in bounded memory (resident set)", .disabled(if: Sanitizer.active == .address, Self.quarantine))
    func millionJSON() async {
        let result = await offThePool {
            await #expect(processExitsWith: .success, observing: [\.standardErrorContent]) {
                LinkListScaleTests.readInChild(.json, unbounded: false)
            }
        }
        if let result, result.exitStatus != .exitCode(0) {
            Issue.record("\(String(decoding: result.standardErrorContent, as: UTF8.self))")
        }
    }

    @Test("a plist of 200,000 URLs is read to the end in bounded memory (resident set)", .disabled(if: Sanitizer.active == .address, Self.quarantine))
    func manyPlist() async {
        let result = await offThePool {
            await #expect(processExitsWith: .success, observing: [\.standardErrorContent]) {
                LinkListScaleTests.readInChild(.plist, unbounded: false)
            }
        }
        if let result, result.exitStatus != .exitCode(0) {
            Issue.record("\(String(decoding: result.standardErrorContent, as: UTF8.self))")
        }
    }

    @Test("a text list of 200,000 URLs is read to the end in bounded memory (resident set)", .disabled(if: Sanitizer.active == .address, Self.quarantine))
    func manyText() async {
        let result = await offThePool {
            await #expect(processExitsWith: .success, observing: [\.standardErrorContent]) {
                LinkListScaleTests.readInChild(.text, unbounded: false)
            }
        }
        if let result, result.exitStatus != .exitCode(0) {
            Issue.record("\(String(decoding: result.standardErrorContent, as: UTF8.self))")
        }
    }

    @Test("the margin catches an unbounded read: the JSON list held whole crosses it")
    func unboundedReadCrossesMargin() async {
        let result = await offThePool {
            await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
                LinkListScaleTests.readInChild(.json, unbounded: true)
            }
        }
        let message = result.map { String(decoding: $0.standardErrorContent, as: UTF8.self) } ?? ""
        #expect(message.contains("the resident set grew"), "\(message)")
    }
}
