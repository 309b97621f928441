import Foundation
import ImgdTestSupport
import Synchronization
import Testing

/// The spool's limits end to end: lists that are too large, still growing, or
/// long to claim cannot hold up the daemon; the state database stays bounded; reports stay small.
/// The real `imgd`, lists dropped as a member of the group would drop them.
///
/// Serialized: several tests write tens of MB and time answers; side by side on a two-core
/// machine they would measure each other.
@Suite("Daemon spool limits (the real imgd)", .serialized, .timeLimit(.minutes(10)), .offThePool)
struct DaemonSpoolLimitTests {
    // MARK: - Lists too large or still growing

    @Test("a 50 GB sparse file is refused at once, unread, with a bad_list report giving its size and the limit; a list dropped after it is claimed")
    func sparseFileRefused() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let daemon = try await DaemonProcess.start(in: scratch.path)
        // truncate -s 50G, then renamed into the spool as a client drops a list.
        let temp = daemon.spool + "/.huge.txt.tmp"
        let fd = open(temp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        try #require(fd >= 0)
        try #require(ftruncate(fd, 50 << 30) == 0)
        close(fd)
        let readBefore = try #require(Self.bytesRead(by: daemon.pid))
        try #require(rename(temp, daemon.spool + "/huge.txt") == 0)
        try daemon.drop("after.txt", "not a url\n")

        let report = try #require(await daemon.report("huge.txt", in: "failed"), "log: \(daemon.log)")
        // Unread: the daemon read (all files and sockets together) far less than the file's size.
        let read = try #require(Self.bytesRead(by: daemon.pid)) - readBefore
        #expect(read < 64 << 20, "imgd read \(read) bytes while refusing a 50 GB list")
        #expect(report["state"] as? String == "refused")
        #expect(report["code"] as? String == "bad_list")
        let reason = report["reason"] as? String ?? ""
        #expect(reason.hasPrefix("too large"), "\(reason)")
        #expect(reason.contains("53687091200") && reason.contains("50 GiB") && reason.contains("1 GiB"), "\(reason)")
        #expect(FileManager.default.fileExists(atPath: daemon.spool + "/failed/huge.txt"))
        #expect(!daemon.spoolNames().contains("huge.txt"))
        #expect(try await daemon.list("huge.txt") == nil)

        let after = try #require(await daemon.finishedList("after.txt"), "log: \(daemon.log)")
        #expect(after["total"] as? Int == 1)
        #expect(await daemon.stop() == 0)
    }

    @Test("max-list-bytes and max-list-lines as settings: a file over the size is refused; past the line limit one bad_list failure, the lines before kept")
    func listLimits() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let daemon = try await DaemonProcess.start(
            in: scratch.path, arguments: ["--max-list-bytes", "64KiB", "--max-list-lines", "1000"])
        // 1,500 bad lines (no network needed), about 20 KB: under the size, over the lines.
        try daemon.drop("lines.txt", (1...1500).map { "not a url \($0)" }.joined(separator: "\n") + "\n")
        try daemon.drop("big.txt", String(repeating: "not a url at all, padding the file\n", count: 2000))

        let list = try #require(await daemon.finishedList("lines.txt"), "log: \(daemon.log)")
        #expect(list["state"] as? String == "failed")
        #expect(list["total"] as? Int == 1001)
        #expect(list["failed"] as? Int == 1001)
        let report = try #require(await daemon.report("lines.txt", in: "failed"))
        #expect(report["failed_by_code"] as? [String: Int] == ["bad_list": 1, "bad_url": 1000])
        let last = try #require((report["failures"] as? [[String: Any]])?.last)
        #expect(last["code"] as? String == "bad_list")
        #expect(last["line"] as? Int == 1001)
        let message = last["message"] as? String ?? ""
        #expect(message.hasPrefix("too large") && message.contains("max-list-lines (1000)"), "\(message)")

        let refused = try #require(await daemon.report("big.txt", in: "failed"), "log: \(daemon.log)")
        #expect(refused["code"] as? String == "bad_list")
        let reason = refused["reason"] as? String ?? ""
        #expect(reason.contains("70000 bytes") && reason.contains("max-list-bytes (64 KiB)"), "\(reason)")
        #expect(await daemon.stop() == 0)
    }

    @Test("a list someone keeps appending to is claimed up to the size it had when claimed: the claim ends while the appends go on")
    func appendedList() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let daemon = try await DaemonProcess.start(in: scratch.path)
        let path = daemon.spool + "/growing.txt"
        // Written in place: its first close is what the daemon claims on. The writer keeps the
        // file open and appends 64 KiB of bad lines every 5 ms (13 MB/s, faster than any claim
        // records lines) until the claim is over, for 30 s at most.
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        try #require(fd >= 0)
        let first = Array(((1...1000).map { "not a url \($0)" }.joined(separator: "\n") + "\n").utf8)
        #expect(first.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) } == first.count)
        let appender = open(path, O_WRONLY | O_APPEND | O_CLOEXEC)
        try #require(appender >= 0)
        close(fd)
        let claimOver = Atomic<Bool>(false)
        let appended = Atomic<Int>(0)
        let writer = Task.detached {
            let chunk = Array(String(repeating: "appended, not a url\n", count: 3276).utf8)
            let deadline = ContinuousClock.now + .seconds(30)
            while !claimOver.load(ordering: .relaxed), ContinuousClock.now < deadline {
                let written = chunk.withUnsafeBytes { write(appender, $0.baseAddress, $0.count) }
                if written > 0 { appended.add(written, ordering: .relaxed) }
                try? await Task.sleep(for: .milliseconds(5))
            }
            close(appender)
            return ContinuousClock.now < deadline
        }

        let list = await daemon.finishedList("growing.txt", timeout: .seconds(30))
        claimOver.store(true, ordering: .relaxed)
        let stoppedByClaim = await writer.value
        let found = try #require(list, "log: \(daemon.log)")
        #expect(stoppedByClaim, "the claim did not end while the file grew")
        let total = found["total"] as? Int ?? 0
        // Each appended line is 20 bytes.
        let lines = 1000 + appended.load(ordering: .relaxed) / 20
        #expect(total >= 1000 && total < lines, "claimed \(total) of \(lines) lines")
        #expect(FileManager.default.fileExists(atPath: daemon.spool + "/failed/growing.txt"))
        #expect(await daemon.stop() == 0)
    }

    // MARK: - Claims that can be interrupted

    @Test("cancel of a list still being claimed is answered before the claim ends and ends it cancelled with what was read; the claim holds up neither another list nor lists")
    func cancelMidClaim() async throws {
        let server = try await TestHTTPServer.start()
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let daemon = try await DaemonProcess.start(in: scratch.path)
        let held = (0..<20).map { "/img/held\($0).png?gate=held" }
        try daemon.drop("held.txt", held.map(server.url).joined(separator: "\n") + "\n")
        try #require(await server.waitForInFlight(atLeast: 1, timeout: .seconds(30)), "log: \(daemon.log)")

        // 3 million lines: many seconds of claiming in a debug build.
        try await daemon.dropNumberedURLs("long.txt", count: 3_000_000)
        let claiming = await eventually(timeout: .seconds(20)) {
            (try await daemon.list("long.txt")?["total"] as? Int ?? 0) > 0
        }
        try #require(claiming, "log: \(daemon.log)")
        #expect(try await daemon.list("long.txt")?["state"] as? String == "claiming")

        // While it is claimed: lists answers at once, and another list warms and finishes.
        let during = try await daemon.lists().first { $0["name"] as? String == "long.txt" }
        #expect(during?["state"] as? String == "claiming", "lists was answered after the claim: \(String(describing: during))")
        server.openGate("held")
        let other = try #require(await daemon.finishedList("held.txt"), "log: \(daemon.log)")
        #expect(other["state"] as? String == "done")
        try #require(
            try await daemon.list("long.txt")?["state"] as? String == "claiming",
            "the claim ended before the other list: nothing was shown")

        // Answered before the claim came to its end: fewer than the 3 million lines were read.
        let reply = try await daemon.result(#"{"cmd":"cancel","list":"long.txt"}"#)
        let cancelled = try #require(reply["cancelled"] as? Int)
        #expect(cancelled > 0 && cancelled < 3_000_000)

        let list = try #require(await daemon.finishedList("long.txt"), "log: \(daemon.log)")
        #expect(list["state"] as? String == "cancelled")
        #expect(list["total"] as? Int == cancelled)
        #expect(list["failed"] as? Int == cancelled)
        let report = try #require(await daemon.report("long.txt", in: "failed"), "log: \(daemon.log)")
        #expect(report["state"] as? String == "cancelled")
        #expect(report["failed_by_code"] as? [String: Int] == ["cancelled": cancelled])
        #expect(FileManager.default.fileExists(atPath: daemon.spool + "/failed/long.txt"))
        #expect(!daemon.spoolNames().contains("long.txt"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: daemon.spool + "/.claimed").isEmpty)
        #expect(await daemon.stop() == 0)
        try await server.shutdown()
    }

    // MARK: - The state database

    @Test("the state database keeps the last 100 finished lists: older ones leave lists, failed and the database, whose size stays bounded")
    func pruning() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let daemon = try await DaemonProcess.start(in: scratch.path)
        let database = scratch.path + "/imgd-data/state/imgd-state.sqlite"
        // 200 bad lines of 200 bytes each: a list that finishes (failed) without the network.
        let junk = String(repeating: "x", count: 190)
        func dropLists(_ numbers: Range<Int>) throws {
            for number in numbers {
                try daemon.drop("l\(number).txt", (0..<200).map { "\(junk) \(number) \($0)" }.joined(separator: "\n") + "\n")
            }
        }
        /// Waits for the last list to finish and the pruning to settle; returns the database's size
        /// in bytes (pages in use and free, WAL included: what SQLite counts).
        func settle(last: Int) async throws -> Int {
            try #require(await daemon.finishedList("l\(last).txt", timeout: .seconds(120)) != nil, "log: \(daemon.log)")
            let settled = await eventually(timeout: .seconds(60)) {
                let rows = try await sqlite(database, "select count(*) from list_urls")
                let retired = try await sqlite(database, "select count(*) from pruning")
                let free = try await sqlite(database, "pragma freelist_count")
                return rows == "20000" && retired == "0" && free == "0"
            }
            let rows = try await sqlite(database, "select count(*) from list_urls")
            try #require(settled, "rows: \(rows), log: \(daemon.log)")
            let pages = try #require(Int(try await sqlite(database, "pragma page_count")))
            let pageSize = try #require(Int(try await sqlite(database, "pragma page_size")))
            return pages * pageSize
        }

        try dropLists(0..<120)
        let first = try await settle(last: 119)
        let finished = try await daemon.lists().compactMap { $0["name"] as? String }
        #expect(finished.count == 100)
        #expect(finished.first == "l119.txt" && finished.last == "l20.txt")
        for gone in ["l0.txt", "l19.txt"] {
            let reply = try await daemon.call(#"{"cmd":"failed","list":"\#(gone)"}"#)
            #expect((reply["error"] as? [String: Any])?["code"] as? String == "not_found", "\(gone): \(reply)")
        }
        let kept = try await daemon.result(#"{"cmd":"failed","list":"l20.txt"}"#)
        #expect((kept["failures"] as? [Any])?.count == 200)
        #expect(try await sqlite(database, "select count(distinct list_id) from list_urls") == "100")
        #expect(try await sqlite(database, "select count(*) from lists") == "100")

        // 120 more: without pruning, twice the rows and more than twice the size.
        try dropLists(120..<240)
        let second = try await settle(last: 239)
        #expect(second <= first + first / 5, "\(first) bytes after 120 lists, \(second) after 240")
        #expect(try await sqlite(database, "select min(id) from lists") == "141")
        #expect(try await sqlite(database, "pragma auto_vacuum") == "2")
        #expect(await daemon.stop() == 0)
    }

    // MARK: - Reports

    @Test(
        "10,000 lines of 8 KiB junk: the report is under 10 MB, each echoed text cut at 512 bytes and JSON-escaped, and the daemon's peak RSS rises by less than 32 MiB",
        .disabled(if: Sanitizer.active != nil, "a sanitized imgd's RSS counts shadow memory and AddressSanitizer's quarantine"))
    func boundedReport() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let daemon = try await DaemonProcess.start(in: scratch.path)
        let before = try #require(Self.peakRSS(daemon.pid))
        // Each line 8,191 bytes (under the URL length limit, so kept whole in the database): an
        // escape sequence, a number, a space (not a URL), then padding.
        let padding = String(repeating: "j", count: 8191)
        var text = ""
        text.reserveCapacity(8192 * 10_000)
        for number in 0..<10_000 {
            let head = "\u{1B}[31m" + String(number) + " "
            text += head + padding.prefix(8191 - head.utf8.count) + "\n"
        }
        try daemon.drop("junk.txt", text)

        // Waited for while the claim makes progress (minutes under a sanitizer beside other work).
        let finished = await eventuallyWhileProgressing {
            let list = try await daemon.list("junk.txt")
            let state = list?["state"] as? String ?? ""
            return ((list?["total"] as? Int ?? 0) + (list?["failed"] as? Int ?? 0), ["done", "failed"].contains(state))
        }
        #expect(finished, "log: \(daemon.log)")
        let list = try #require(await daemon.finishedList("junk.txt"), "log: \(daemon.log)")
        #expect(list["failed"] as? Int == 10_000)
        let path = daemon.spool + "/failed/junk.txt.report.json"
        try #require(await eventually(timeout: .seconds(10)) { FileManager.default.fileExists(atPath: path) })
        // Measured here: a 6.6 MB report, VmHWM 39.8 MiB before and 48.6 MiB after (+8.6 MiB);
        // before reports were streamed, 83 MB and a 305 MB spike.
        let after = try #require(Self.peakRSS(daemon.pid))
        let bytes = try #require(FileManager.default.contents(atPath: path))
        #expect(bytes.count < 10_000_000, "report of \(bytes.count) bytes")
        #expect(!bytes.contains(0x1B), "a raw ESC in the report")
        let report = try #require(try JSONSerialization.jsonObject(with: bytes) as? [String: Any])
        let failures = try #require(report["failures"] as? [[String: Any]])
        #expect(failures.count == 10_000)
        let url = failures.first?["url"] as? String ?? ""
        #expect(url.hasPrefix("\u{1B}[31m0 jjj"), "\(url.prefix(40))")
        #expect(url.hasSuffix("…[\(8191 - 512) more bytes]"), "\(url.suffix(40))")
        #expect(failures.allSatisfy { ($0["url"] as? String)?.utf8.count ?? .max < 600 })
        #expect(after - before < 32 << 20, "peak RSS \(before >> 20) MiB before, \(after >> 20) MiB after")
        #expect(await daemon.stop() == 0)
    }

    /// VmHWM of `pid` in bytes: the most resident memory it has had.
    private static func peakRSS(_ pid: Int32) -> Int? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") })
        else { return nil }
        return line.split(separator: " ").dropFirst().first.flatMap { Int($0) }.map { $0 * 1024 }
    }
}

extension DaemonSpoolLimitTests {
    /// The bytes process `pid` has read so far, by any read call (`rchar` of /proc/PID/io).
    static func bytesRead(by pid: Int32) -> Int? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/io", encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix("rchar:") {
            return Int(line.dropFirst("rchar:".count).trimmingCharacters(in: .whitespaces))
        }
        return nil
    }
}
