import Foundation
import ImgdTestSupport
import Logging
import Testing

@testable import ImgdDaemon

/// The daemon's log is the sink for every message: whatever a message quotes, it is one line.
@Suite("Daemon log", .timeLimit(.minutes(5)), .offThePool)
struct JournalLogHandlerTests {
    /// What `log` wrote to a pipe, as text.
    private func written(journal: Bool, _ body: (Logger) -> Void) throws -> String {
        var fds: [Int32] = [0, 0]
        try #require(pipe(&fds) == 0)
        defer { close(fds[0]) }
        var info = stat()
        fstat(fds[1], &info)
        let stream = journal ? ["JOURNAL_STREAM": "\(info.st_dev):\(info.st_ino)"] : [:]
        let handler = JournalLogHandler(environment: stream, descriptor: fds[1])
        #expect(handler.usesJournalPriorities == journal)
        body(Logger(label: "test") { _ in handler })
        close(fds[1])
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(fds[0], $0.baseAddress, $0.count) }
            guard count > 0 else { break }
            bytes += chunk[..<count]
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    @Test("a name with a newline and <0> cannot forge a journald line; ESC and C1 are escaped")
    func forgedLine() throws {
        let text = try written(journal: true) { log in
            log.info("claimed list evil\n<0>imgd: FAKE EMERGENCY: 1 lines")
            log.warning("refused a\u{1B}[2J\u{9B}b\r")
        }
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines == [#"<6>claimed list evil\n<0>imgd: FAKE EMERGENCY: 1 lines"#, #"<4>refused a\x1b[2J\u009bb\r"#, ""])
    }

    @Test("without the journal: one plain line; a huge message is cut with a marker")
    func plainAndCut() throws {
        let text = try written(journal: false) { log in
            log.error("x\ny")
            log.info("\(String(repeating: "a", count: JournalLogHandler.messageLimit + 100))")
        }
        let lines = text.split(separator: "\n")
        #expect(lines.count == 2)
        #expect(lines[0] == #"imgd: error: x\ny"#)
        #expect(lines[1].hasSuffix("a…[100 more bytes]"))
        #expect(lines[1].utf8.count < JournalLogHandler.messageLimit + 40)
    }

    @Test("metadata follows the message as key=value in key order, escaped like the message; levels map to priorities")
    func metadataAndLevels() throws {
        let text = try written(journal: true) { log in
            var scoped = log
            scoped[metadataKey: "peer"] = "uid 1000"
            scoped.notice("refused", metadata: ["list": "evil\n<0>x"])
            log.info("claimed", metadata: ["list": "a \"b\" c", "url": "", "n": "1=1"])
            log.info("forged", metadata: ["list": #"x" peer=root z=""#, "path": #"a\b"#])
            log.debug("hidden below info")
            log.critical("gone")
        }
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines == [
            #"<5>refused list=evil\n<0>x peer="uid 1000""#, #"<6>claimed list="a \"b\" c" n="1=1" url="""#,
            // A quote in a value is escaped once: the value cannot end early and add a pair.
            #"<6>forged list="x\" peer=root z=\"" path=a\\b"#, "<2>gone", "",
        ])
    }
}
