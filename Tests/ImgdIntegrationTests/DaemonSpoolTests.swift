import Foundation
import ImgdCore
import ImgdTestSupport
import Testing

/// The spool end to end (Protocol.md, *Spool*): the real `imgd` daemon in a scratch folder, the
/// real test server, lists dropped the way clients drop them, and the daemon's answers read
/// back through the control socket, the spool's folders, its reports and the cache itself.
///
/// Serialized: several tests warm thousands of URLs against delayed responses, and on a
/// two-core machine running them side by side would measure the scheduler, not the spool.
@Suite("Daemon spool (the real imgd)", .serialized, .timeLimit(.minutes(10)), .offThePool)
struct DaemonSpoolTests {
    // MARK: - Lists that finish

    @Test("a list of 30 images: each cached byte-exact, the list moved to done/ with its report, lists says done")
    func listOfThirty() async throws {
        let server = try await TestHTTPServer.start()
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let daemon = try await DaemonProcess.start(in: scratch.path)
        let targets = (0..<30).map { "/img/p\($0).png?w=\(8 + $0)&h=9" }
        try daemon.drop("thirty.txt", "# thirty images\n" + targets.map(server.url).joined(separator: "\n") + "\n")

        let list = try #require(await daemon.finishedList("thirty.txt"), "log: \(daemon.log)")
        #expect(list["state"] as? String == "done")
        #expect(list["total"] as? Int == 30)
        #expect(list["cached"] as? Int == 30)
        #expect(list["already_cached"] as? Int == 0)
        #expect(list["failed"] as? Int == 0)
        #expect(list["pending"] as? Int == 0)

        let report = try #require(await daemon.report("thirty.txt", in: "done"))
        #expect(report["name"] as? String == "thirty.txt")
        #expect(report["state"] as? String == "done")
        #expect(report["total"] as? Int == 30)
        #expect(report["cached"] as? Int == 30)
        #expect(report["already_cached"] as? Int == 0)
        #expect(report["failed"] as? Int == 0)
        #expect((report["failures"] as? [Any])?.isEmpty == true)
        #expect((report["failed_by_code"] as? [String: Any])?.isEmpty == true)
        let bodies = try targets.map { try #require(TestHTTPServer.body(for: $0)) }
        #expect(report["bytes"] as? Int == bodies.reduce(0) { $0 + $1.count })
        #expect((report["claimed_at"] as? String)?.hasSuffix("Z") == true)
        #expect((report["finished_at"] as? String)?.hasSuffix("Z") == true)
        #expect((report["duration_s"] as? Double).map { $0 >= 0 } == true)

        #expect(FileManager.default.fileExists(atPath: daemon.spool + "/done/thirty.txt"))
        #expect(!daemon.spoolNames().contains("thirty.txt"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: daemon.spool + "/.claimed").isEmpty)

        for (target, body) in zip(targets, bodies) {
            let url = server.url(target)
            let relative = try ImageURL(url).cacheKey.relativePath
            // The cache layout: cache/ab/<sha256 of the normalised URL>.
            #expect(try cachedBytes(scratch, url) == body, "\(target)")
            let got = try await daemon.result(#"{"cmd":"get","url":"\#(url)","fetch":false}"#)
            let path = try #require(got["path"] as? String)
            #expect(path.hasSuffix("imgd-data/cache/" + relative))
            #expect(FileManager.default.contents(atPath: path).map(Array.init) == body)
            #expect(got["source"] as? String != "network")
        }
        #expect(server.totalRequests == 30)
        #expect(await daemon.stop() == 0)
        try await server.shutdown()
    }

    @Test("bad lines, a 404 and an HTML page: the list goes to failed/ with each failure's line and code; the good ones are cached")
    func listWithFailures() async throws {
        let server = try await TestHTTPServer.start()
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let daemon = try await DaemonProcess.start(in: scratch.path)
        let lines = [
            server.url("/img/a.png"),  // 1
            "ftp://example.com/x.png",  // 2: bad_url
            "",  // 3
            "# a comment",  // 4
            server.url("/status/404"),  // 5: http_404
            "not a url at all",  // 6: bad_url
            server.url("/html"),  // 7: not_image
            server.url("/img/b.gif?w=5&h=7"),  // 8
        ]
        try daemon.drop("links.txt", lines.joined(separator: "\n") + "\n")

        let list = try #require(await daemon.finishedList("links.txt"), "log: \(daemon.log)")
        #expect(list["state"] as? String == "failed")
        #expect(list["total"] as? Int == 6)
        #expect(list["cached"] as? Int == 2)
        #expect(list["failed"] as? Int == 4)

        let report = try #require(await daemon.report("links.txt", in: "failed"))
        #expect(report["state"] as? String == "failed")
        #expect(report["total"] as? Int == 6)
        #expect(report["cached"] as? Int == 2)
        #expect(report["failed"] as? Int == 4)
        #expect(report["failed_by_code"] as? [String: Int] == ["bad_url": 2, "http_404": 1, "not_image": 1])
        let failures = try #require(report["failures"] as? [[String: Any]])
        let summary = failures.map { "\($0["line"] as? Int ?? -1) \($0["code"] as? String ?? "?") \($0["url"] as? String ?? "?")" }
        #expect(summary == [
            "2 bad_url ftp://example.com/x.png",
            "5 http_404 \(try ImageURL(server.url("/status/404")).normalized)",
            "6 bad_url not a url at all",
            "7 not_image \(try ImageURL(server.url("/html")).normalized)",
        ])
        #expect(failures.allSatisfy { ($0["message"] as? String)?.isEmpty == false })
        #expect(FileManager.default.fileExists(atPath: daemon.spool + "/failed/links.txt"))
        #expect(!FileManager.default.fileExists(atPath: daemon.spool + "/done/links.txt"))

        // `failed {list}` tells the same story.
        let remembered = try await daemon.result(#"{"cmd":"failed","list":"links.txt"}"#)
        let listed = (remembered["failures"] as? [[String: Any]] ?? []).map { "\($0["line"] as? Int ?? -1) \($0["code"] as? String ?? "?")" }
        #expect(listed == ["2 bad_url", "5 http_404", "6 bad_url", "7 not_image"])

        for target in ["/img/a.png", "/img/b.gif?w=5&h=7"] {
            #expect(try cachedBytes(scratch, server.url(target)) == TestHTTPServer.body(for: target))
        }
        #expect(await daemon.stop() == 0)
        try await server.shutdown()
    }

    @Test(".json and .plist lists are taken like text lists")
    func jsonAndPlistLists() async throws {
        let server = try await TestHTTPServer.start()
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let daemon = try await DaemonProcess.start(in: scratch.path)
        let jsonTargets = (0..<5).map { "/img/j\($0).png?w=\(6 + $0)" }
        let plistTargets = (0..<5).map { "/img/l\($0).jpg?w=\(6 + $0)&h=4" }
        let json = try JSONSerialization.data(withJSONObject: jsonTargets.map(server.url), options: [.withoutEscapingSlashes])
        try daemon.drop("a.json", String(decoding: json, as: UTF8.self))
        let strings = plistTargets.map { "    <string>\(server.url($0).replacingOccurrences(of: "&", with: "&amp;"))</string>" }
        try daemon.drop("b.plist", """
            <?xml version="1.0" encoding="UTF-8"?>
            <!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
            <plist version="1.0">
            <array>
            \(strings.joined(separator: "\n"))
            </array>
            </plist>

            """)

        for (name, targets) in [("a.json", jsonTargets), ("b.plist", plistTargets)] {
            let list = try #require(await daemon.finishedList(name), "log: \(daemon.log)")
            #expect(list["state"] as? String == "done", "\(name): \(list)")
            #expect(list["total"] as? Int == 5)
            #expect(list["cached"] as? Int == 5)
            let report = try #require(await daemon.report(name, in: "done"), "\(name)")
            #expect(report["state"] as? String == "done")
            #expect(FileManager.default.fileExists(atPath: daemon.spool + "/done/" + name))
            for target in targets {
                #expect(try cachedBytes(scratch, server.url(target)) == TestHTTPServer.body(for: target), "\(target)")
            }
        }
        #expect(await daemon.stop() == 0)
        try await server.shutdown()
    }

    @Test("a list still being written is not claimed until its writer closes it")
    func slowWriter() async throws {
        let server = try await TestHTTPServer.start()
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let daemon = try await DaemonProcess.start(in: scratch.path)
        let targets = (0..<20).map { "/img/slow\($0).png" }
        let text = Array((targets.map(server.url).joined(separator: "\n") + "\n").utf8)
        // Cut mid-line: claimed now, the list would hold a broken URL.
        let half = text.count / 2 + 3
        let fd = open(daemon.spool + "/slow.txt", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        try #require(fd >= 0)
        #expect(text[..<half].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) } == half)

        // The event to wait on: a list dropped after slow.txt was created is claimed and finished.
        // The watcher hands names to the claimer in the order their events came, so had slow.txt
        // been taken on its creation or its first write, it would have been claimed before this one.
        try daemon.drop("after.txt", server.url("/img/after.png") + "\n")
        let after = try #require(await daemon.finishedList("after.txt"), "log: \(daemon.log)")
        #expect(after["state"] as? String == "done")
        #expect(daemon.spoolNames().contains("slow.txt"), "log: \(daemon.log)")
        #expect(try await daemon.list("slow.txt") == nil)
        #expect(server.requestCount(prefix: "/img/slow") == 0)

        #expect(text[half...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) } == text.count - half)
        close(fd)
        let slow = try #require(await daemon.finishedList("slow.txt"), "log: \(daemon.log)")
        #expect(slow["state"] as? String == "done")
        #expect(slow["total"] as? Int == 20)
        #expect(slow["cached"] as? Int == 20)
        #expect(FileManager.default.fileExists(atPath: daemon.spool + "/done/slow.txt"))
        #expect(await daemon.stop() == 0)
        try await server.shutdown()
    }

    @Test("a symlink, a FIFO and a folder in the spool are refused with a report in failed/ saying why: the first two removed from the spool, never moved; the folder left")
    func notRegularFiles() async throws {
        let server = try await TestHTTPServer.start()
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let daemon = try await DaemonProcess.start(in: scratch.path)
        // What the link points to is a perfectly good list, outside the spool: it must not be read.
        let outside = scratch.path + "/outside.txt"
        let outsideText = server.url("/img/outside.png") + "\n"
        try outsideText.write(toFile: outside, atomically: true, encoding: .utf8)
        try #require(symlink(outside, daemon.spool + "/link.txt") == 0)
        try #require(mkfifo(daemon.spool + "/pipe.txt", 0o644) == 0)
        try #require(mkdir(daemon.spool + "/folder.txt", 0o755) == 0)

        let link = try #require(await daemon.report("link.txt", in: "failed"), "log: \(daemon.log)")
        #expect(link["state"] as? String == "refused")
        #expect((link["reason"] as? String)?.contains("symbolic link") == true, "\(link)")
        var info = stat()
        #expect(lstat(daemon.spool + "/failed/link.txt", &info) != 0 && lstat(daemon.spool + "/link.txt", &info) != 0)
        #expect(try String(contentsOfFile: outside, encoding: .utf8) == outsideText)
        #expect(lstat(outside, &info) == 0 && (info.st_mode & S_IFMT) == S_IFREG)

        let pipe = try #require(await daemon.report("pipe.txt", in: "failed"), "log: \(daemon.log)")
        #expect(pipe["state"] as? String == "refused")
        #expect((pipe["reason"] as? String)?.contains("FIFO") == true, "\(pipe)")
        #expect(lstat(daemon.spool + "/failed/pipe.txt", &info) != 0 && lstat(daemon.spool + "/pipe.txt", &info) != 0)

        let folder = try #require(await daemon.report("folder.txt", in: "failed"), "log: \(daemon.log)")
        #expect((folder["reason"] as? String)?.contains("folder") == true, "\(folder)")
        #expect(lstat(daemon.spool + "/folder.txt", &info) == 0 && (info.st_mode & S_IFMT) == S_IFDIR)

        #expect(daemon.spoolNames().filter { !$0.hasPrefix(".") } == ["done", "failed", "folder.txt"])
        #expect(try await daemon.lists().isEmpty)
        #expect(server.totalRequests == 0)
        #expect(await daemon.stop() == 0)
        try await server.shutdown()
    }

    // MARK: - Stops and crashes

    @Test("kill -9 in the middle of a 5,000-URL list: after a restart it completes, nothing fetched twice but what was in flight, fsck is clean")
    func killNineMidList() async throws {
        let server = try await TestHTTPServer.start()
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let arguments = ["--max-parallel", "8", "--max-per-host", "8"]
        var daemon = try await DaemonProcess.start(in: scratch.path, arguments: arguments)
        let targets = (0..<5000).map { "/img/k\($0).png?delay_ms=3" }
        try daemon.drop("big.txt", targets.map(server.url).joined(separator: "\n") + "\n")

        let settledAtKill = Settled()
        let progressed = await eventually(timeout: .seconds(60)) {
            guard let list = try await daemon.list("big.txt"), let total = list["total"] as? Int,
                let pending = list["pending"] as? Int
            else { return false }
            settledAtKill.value = total - pending
            return total == 5000 && total - pending >= 500
        }
        try #require(progressed, "log: \(daemon.log)")
        #expect(await daemon.stop(SIGKILL) == 128 + SIGKILL)
        #expect(settledAtKill.value < 4000, "the kill came too late to be mid-list")
        let requestsAtKill = server.totalRequests
        // What the cache held at the kill: its index's rows (a file without its row is not cached).
        let cachedAtKill = Set(
            try await sqlite(scratch.path + "/imgd-data/cache/index.sqlite", "select url from entries")
                .split(separator: "\n").map { String($0.dropFirst(server.origin.count)) })
        let filesAtKill = scratch.files(under: "imgd-data/cache").count

        daemon = try await DaemonProcess.start(in: scratch.path, arguments: arguments)
        let list = try #require(await daemon.finishedList("big.txt", timeout: .seconds(90)), "log: \(daemon.log)")
        #expect(list["state"] as? String == "done")
        #expect(list["total"] as? Int == 5000)
        #expect(list["failed"] as? Int == 0)
        #expect((list["cached"] as? Int ?? 0) + (list["already_cached"] as? Int ?? 0) == 5000, "\(list)")
        let report = try #require(await daemon.report("big.txt", in: "done"))
        #expect(report["state"] as? String == "done")
        #expect((report["cached"] as? Int ?? 0) + (report["already_cached"] as? Int ?? 0) == 5000)
        #expect(daemon.log.contains("resuming 1 list"))

        // Every URL was fetched; again only what was in flight or uncommitted at the kill.
        #expect(Set(server.requestLog).count == 5000)
        var seen: [String: [Int]] = [:]
        for (index, target) in server.requestLog.enumerated() { seen[target, default: []].append(index) }
        let twice = seen.filter { $0.value.count > 1 }
        let context = """
            \(server.totalRequests) requests, \(requestsAtKill) before the kill; at the kill \(cachedAtKill.count) \
            index rows and \(filesAtKill) files; fetched twice (first request at): \(twice.values.map { $0[0] }.sorted())
            """
        // Nothing the cache held at the kill was fetched again…
        #expect(twice.keys.allSatisfy { !cachedAtKill.contains($0) }, "\(context)")
        #expect(twice.values.allSatisfy { $0.count == 2 }, "\(context)")
        // …only URLs requested before the kill whose rows were not yet committed were: transfers
        // running, bodies waiting to be published, rows waiting for their batch (≤ 5 ms).
        #expect(twice.count <= requestsAtKill - cachedAtKill.count, "\(context)")
        #expect(await daemon.stop() == 0)

        let fsck = try await BinaryRunner.imgd(["fsck", "--cache", "imgd-data/cache"], in: scratch.path)
        #expect(fsck.status == 0, "stdout: \(fsck.stdout) stderr: \(fsck.stderr)")
        #expect(fsck.stdout.contains("checked 5000 entries: 0 bad"), "\(fsck.stdout)")
        try await server.shutdown()
    }

    @Test("SIGTERM mid-warm: exit 0 with transfers stopped, not cut by the 5 s deadline; after a restart the list completes, no URL failed as cancelled")
    func sigtermMidWarm() async throws {
        let server = try await TestHTTPServer.start()
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let arguments = ["--max-per-host", "8"]
        var daemon = try await DaemonProcess.start(in: scratch.path, arguments: arguments)
        let targets = (0..<2000).map { "/img/t\($0).png?delay_ms=3" }
        try daemon.drop("warm.txt", targets.map(server.url).joined(separator: "\n") + "\n")
        let progressed = await eventually(timeout: .seconds(60)) {
            guard let list = try await daemon.list("warm.txt"), let pending = list["pending"] as? Int else { return false }
            return list["total"] as? Int == 2000 && pending <= 1800
        }
        try #require(progressed, "log: \(daemon.log)")
        #expect(try await daemon.list("warm.txt")?["state"] as? String == "active")

        let stopped = await daemon.stop(SIGTERM, within: .seconds(10))
        #expect(stopped?.status == 0, "log: \(daemon.log)")
        // Stopped by its own shutdown, not by the deadline giving up on it.
        #expect(!daemon.log.contains("did not stop within"), "log: \(daemon.log)")

        daemon = try await DaemonProcess.start(in: scratch.path, arguments: arguments)
        let list = try #require(await daemon.finishedList("warm.txt", timeout: .seconds(60)), "log: \(daemon.log)")
        #expect(list["state"] as? String == "done")
        #expect(list["failed"] as? Int == 0)
        #expect((list["cached"] as? Int ?? 0) + (list["already_cached"] as? Int ?? 0) == 2000)
        let report = try #require(await daemon.report("warm.txt", in: "done"))
        #expect((report["failed_by_code"] as? [String: Any])?["cancelled"] == nil)
        #expect((report["failures"] as? [Any])?.isEmpty == true)
        let failures = try await daemon.result(#"{"cmd":"failed","list":"warm.txt"}"#)
        #expect((failures["failures"] as? [Any])?.isEmpty == true)
        #expect(await daemon.stop() == 0)
        try await server.shutdown()
    }

    @Test("SIGTERM while a long list is being claimed: exit 0 with the claim cut short; the list stays in the spool and is claimed again, whole, at the next start")
    func sigtermMidClaim() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        var daemon = try await DaemonProcess.start(in: scratch.path)
        // 1.5 million short lines: claiming them takes several seconds in a debug build (the URLs
        // are never fetched). The stop comes as soon as the claim has begun.
        try await daemon.dropNumberedURLs("long.txt", count: 1_500_000)
        let claiming = await eventually(timeout: .seconds(20)) {
            (try await daemon.list("long.txt")?["total"] as? Int ?? 0) > 0
        }
        try #require(claiming, "log: \(daemon.log)")

        let stopped = await daemon.stop(SIGTERM, within: .seconds(10))
        #expect(stopped?.status == 0, "log: \(daemon.log)")
        #expect(!daemon.log.contains("did not stop within"), "log: \(daemon.log)")
        // The claim stopped where it was, not at its end: its row is still claiming, with part of the lines.
        let database = scratch.path + "/imgd-data/state/imgd-state.sqlite"
        let row = try await ChildProcess.run("/usr/bin/sqlite3", [database, "SELECT state, total FROM lists WHERE name = 'long.txt'"])
        let fields = row.stdout.trimmingCharacters(in: .whitespacesAndNewlines).split(separator: "|")
        #expect(fields.first == "claiming", "\(row.stdout)")
        #expect(fields.last.flatMap { Int($0) }.map { $0 > 0 && $0 < 1_500_000 } == true, "\(row.stdout)")
        #expect(daemon.spoolNames().contains("long.txt"), "the list left the spool: \(daemon.spoolNames())")

        // The next start drops the half-made claim and takes the file anew.
        daemon = try await DaemonProcess.start(in: scratch.path)
        let again = await eventually(timeout: .seconds(20)) {
            let lists = try await daemon.lists().filter { $0["name"] as? String == "long.txt" }
            return lists.count == 1 && (lists[0]["total"] as? Int ?? 0) > 0
        }
        let lists = try await daemon.lists()
        #expect(again, "lists: \(lists) log: \(daemon.log)")
        // Whole: every line, none lost to the first claim's half-made rows, recorded once.
        // Waited for as long as the claim makes progress (minutes under ThreadSanitizer); a
        // claim that stops still fails.
        let whole = await eventuallyWhileProgressing {
            let list = try await daemon.list("long.txt")
            let total = list?["total"] as? Int ?? 0
            return (total, list?["state"] as? String != "claiming" && total == 1_500_000)
        }
        let after = try await daemon.lists().prefix(2)
        #expect(whole, "lists: \(after) log: \(daemon.log)")
        #expect(await daemon.stop(SIGTERM, within: .seconds(10))?.status == 0)
    }

    @Test("SIGTERM mid-claim, restart: the claim made anew gets a new id, so the pruner of the abandoned one leaves its rows; the list ends failed with every row")
    func restartedClaimKeepsItsRows() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let database = scratch.path + "/imgd-data/state/imgd-state.sqlite"
        var daemon = try await DaemonProcess.start(in: scratch.path)
        // 1.5 million bad lines: as long to claim as URLs, and all failed at claim (bad_url), so
        // the list finishes as soon as it is claimed, without the network. A fifth of that under
        // a sanitizer, which claims more than five times slower (still over 20 s, so the SIGTERM
        // lands mid-claim): 1.5 million did not fit in the 120 s below under AddressSanitizer on
        // a loaded machine.
        let count = 1_500_000 / Sanitizer.slowdown
        try await daemon.dropNumberedURLs("long.txt", count: count, prefix: "not-a-url-")
        let claiming = await eventually(timeout: .seconds(20)) {
            (try await daemon.list("long.txt")?["total"] as? Int ?? 0) > 0
        }
        try #require(claiming, "log: \(daemon.log)")
        let first = try await sqlite(database, "select id from lists where name = 'long.txt'")
        #expect(await daemon.stop(SIGTERM, within: .seconds(10))?.status == 0, "log: \(daemon.log)")
        try #require(daemon.spoolNames().contains("long.txt"))

        daemon = try await DaemonProcess.start(in: scratch.path)
        let list = try #require(await daemon.finishedList("long.txt", timeout: .seconds(120)), "log: \(daemon.log)")
        #expect(list["state"] as? String == "failed")
        #expect(list["total"] as? Int == count && list["failed"] as? Int == count)
        let id = try await sqlite(database, "select id from lists where name = 'long.txt'")
        #expect(!first.isEmpty && id != first)
        // The abandoned claim's rows pruned, the new list's all there.
        let settled = await eventually(timeout: .seconds(60)) {
            try await sqlite(database, "select count(*) from pruning") == "0"
        }
        #expect(settled)
        #expect(try await sqlite(database, "select count(*) from list_urls where list_id = \(id)") == "\(count)")
        #expect(try await sqlite(database, "select count(*) from list_urls") == "\(count)")
        #expect(await daemon.stop(SIGTERM, within: .seconds(10))?.status == 0)
    }

    /// `http://a/N` (or `<prefix>N`) for N in 0..<count, one a line, as bytes (built directly: formatting two million
    /// strings is slow in a debug build).
    static func numberedURLs(_ count: Int, prefix: String = "http://a/") -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(count * 17)
        let prefix = Array(prefix.utf8)
        var digits = [UInt8](repeating: 0, count: 20)
        for number in 0..<count {
            bytes.append(contentsOf: prefix)
            var value = number
            var length = 0
            repeat {
                digits[length] = UInt8(ascii: "0") + UInt8(value % 10)
                value /= 10
                length += 1
            } while value > 0
            for index in stride(from: length - 1, through: 0, by: -1) { bytes.append(digits[index]) }
            bytes.append(0x0A)
        }
        return bytes
    }

    // MARK: - Scheduling

    @Test("lists take turns: a 10-URL list dropped after a 2,000-URL one finishes first")
    func roundRobin() async throws {
        let server = try await TestHTTPServer.start()
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let daemon = try await DaemonProcess.start(in: scratch.path)
        let events = try await daemon.subscribe(["list_claimed", "list_done"])
        defer { events.close() }
        let big = (0..<2000).map { "/img/big\($0).png?delay_ms=2" }
        let small = (0..<10).map { "/img/small\($0).png" }
        try daemon.drop("big.txt", big.map(server.url).joined(separator: "\n") + "\n")
        try #require(await events.first("list_claimed") { $0["name"] as? String == "big.txt" } != nil, "log: \(daemon.log)")
        // The big list's window is queued in the downloader before the small list arrives.
        try #require(await server.waitForRequests(atLeast: 50, timeout: .seconds(30)))
        try daemon.drop("small.txt", small.map(server.url).joined(separator: "\n") + "\n")

        let smallDone = try #require(await events.listDone("small.txt"), "log: \(daemon.log)")
        let bigDone = try #require(await events.listDone("big.txt", timeout: .seconds(60)), "log: \(daemon.log)")
        #expect(smallDone.seq < bigDone.seq)
        #expect(smallDone.data["state"] as? String == "done")
        #expect(bigDone.data["state"] as? String == "done")
        // Taking turns: between the small list's first and last request, the big list got about
        // one request per small one, not its whole queued window.
        let log = server.requestLog
        let positions = small.compactMap { log.firstIndex(of: $0) }
        #expect(positions.count == 10)
        if let first = positions.min(), let last = positions.max() {
            #expect(last - first < 40, "the small list's requests span \(first)...\(last) of \(log.count)")
        }
        #expect(await daemon.stop() == 0)
        try await server.shutdown()
    }

    @Test("an on-demand get while a big list warms goes before the list's queued URLs")
    func getBeforeList() async throws {
        let server = try await TestHTTPServer.start()
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let daemon = try await DaemonProcess.start(in: scratch.path)
        // 10 ms a response: the list keeps 4 transfers running (its host's cap) at about 400
        // requests a second, so the few milliseconds the get takes to reach the engine on a
        // loaded machine let few of the list's requests in ahead of it.
        let big = (0..<1500).map { "/img/w\($0).png?delay_ms=10" }
        try daemon.drop("big.txt", big.map(server.url).joined(separator: "\n") + "\n")
        try #require(await server.waitForRequests(atLeast: 100, timeout: .seconds(30)), "log: \(daemon.log)")

        // Connected and answered once before the count is taken, so the window between the
        // count and the get's request holds only the get's own way through the daemon.
        let connection = try await KeptConnection(daemon.socket)
        _ = try await connection.result(#"{"cmd":"ping"}"#)
        let before = server.totalRequests
        let target = "/img/ondemand.png?w=12"
        let got = try await connection.result(#"{"cmd":"get","url":"\#(server.url(target))"}"#)
        #expect(got["source"] as? String == "network")
        #expect(got["bytes"] as? Int == TestHTTPServer.body(for: target)?.count)
        let position = try #require(server.requestLog.firstIndex(of: target))
        // At most the list's transfers already running (4 per host) go before it.
        #expect(position < before + 12, "the get was request \(position); \(before) had arrived when it was sent")
        // And answered while the list still warmed.
        #expect(try await daemon.list("big.txt")?["state"] as? String == "active")
        #expect(await daemon.stop() == 0)
        try await server.shutdown()
    }

    // MARK: - Pins and commands

    @Test("a list with a `# pin: 24h` header pins its images; a list without does not")
    func pinnedList() async throws {
        let server = try await TestHTTPServer.start()
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let daemon = try await DaemonProcess.start(in: scratch.path)
        let pinned = (0..<5).map { "/img/pin\($0).png?w=20&h=20" }
        let plain = (0..<3).map { "/img/plain\($0).png" }
        let droppedAt = Int(Date().timeIntervalSince1970 * 1000)
        try daemon.drop("pinned.txt", "# pin: 24h\n" + pinned.map(server.url).joined(separator: "\n") + "\n")
        try daemon.drop("plain.txt", plain.map(server.url).joined(separator: "\n") + "\n")
        let list = try #require(await daemon.finishedList("pinned.txt"), "log: \(daemon.log)")
        #expect(list["state"] as? String == "done")
        #expect(try #require(await daemon.finishedList("plain.txt"))["state"] as? String == "done")

        let status = try await daemon.result(#"{"cmd":"status"}"#)
        let pinnedBytes = pinned.compactMap { TestHTTPServer.body(for: $0)?.count }.reduce(0, +)
        #expect((status["cache"] as? [String: Any])?["pinned_bytes"] as? Int == pinnedBytes, "\(status)")
        #expect(await daemon.stop() == 0)

        let index = scratch.path + "/imgd-data/cache/index.sqlite"
        #expect(try await sqlite(index, "select count(*) from entries") == "8")
        #expect(try await sqlite(index, "select count(*) from entries where pinned_until is not null") == "5")
        let until = try #require(Int(try await sqlite(index, "select min(pinned_until) from entries where pinned_until is not null")))
        let day = 86_400_000
        #expect(until >= droppedAt + day - 60_000 && until <= droppedAt + day + 120_000, "pinned until \(until)")
        try await server.shutdown()
    }

    @Test("retry {list}: a list that failed on a 503 ends done once the server answers; other failures stay remembered")
    func retryList() async throws {
        let server = try await TestHTTPServer.start()
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        // One attempt: the 503 fails the URL at once instead of after back-off.
        let daemon = try await DaemonProcess.start(in: scratch.path, arguments: ["--attempts", "1"])
        let flaky = "/flaky/f.png?fail=1&status=503"
        let targets = ["/img/r0.png", flaky, "/img/r1.png"]
        try daemon.drop("flaky.txt", targets.map(server.url).joined(separator: "\n") + "\n")
        let failed = try #require(await daemon.finishedList("flaky.txt"), "log: \(daemon.log)")
        #expect(failed["state"] as? String == "failed")
        #expect(failed["failed"] as? Int == 1)
        let firstReport = try #require(await daemon.report("flaky.txt", in: "failed"))
        #expect(firstReport["failed_by_code"] as? [String: Int] == ["http_503": 1])

        // Someone else's URL fails too, and is remembered.
        let other = server.url("/flaky/other.png?fail=1&status=503")
        let got = try await daemon.call(#"{"cmd":"get","url":"\#(other)"}"#)
        #expect((got["error"] as? [String: Any])?["code"] as? String == "http_503")

        // The server now answers (`/flaky` fails once per target), and the list is retried.
        let retried = try await daemon.result(#"{"cmd":"retry","list":"flaky.txt"}"#)
        #expect(retried["requeued"] as? Int == 1)
        let done = await eventually(timeout: .seconds(20)) {
            try await daemon.list("flaky.txt")?["state"] as? String == "done"
        }
        let list = try #require(await daemon.list("flaky.txt"))
        #expect(done, "lists: \(list) log: \(daemon.log)")
        #expect(list["cached"] as? Int == 3)
        #expect(list["failed"] as? Int == 0)
        let report = try #require(await daemon.report("flaky.txt", in: "done"), "log: \(daemon.log)")
        #expect(report["state"] as? String == "done")
        #expect(report["cached"] as? Int == 3)
        #expect(report["failed"] as? Int == 0)
        #expect((report["failures"] as? [Any])?.isEmpty == true)
        #expect(FileManager.default.fileExists(atPath: daemon.spool + "/done/flaky.txt"))
        #expect(!FileManager.default.fileExists(atPath: daemon.spool + "/failed/flaky.txt"))
        #expect(!FileManager.default.fileExists(atPath: daemon.spool + "/failed/flaky.txt.report.json"))
        #expect(server.requestCount(flaky) == 2)
        #expect(try cachedBytes(scratch, server.url(flaky)) == TestHTTPServer.body(for: flaky))
        // The retry forgot the list's failures only: the other URL's is still remembered (it
        // was forgotten too, for everyone, when a list's retry cleared the whole memory).
        let remembered = try await daemon.result(#"{"cmd":"failed"}"#)["failures"] as? [[String: Any]] ?? []
        #expect(remembered.map { $0["url"] as? String } == [other])
        #expect(server.requestCount("/flaky/other.png?fail=1&status=503") == 1)
        #expect(await daemon.stop() == 0)
        try await server.shutdown()
    }

    @Test("retry {list} of a name dropped twice takes back that list's own file and report")
    func retryReusedName() async throws {
        let server = try await TestHTTPServer.start()
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let daemon = try await DaemonProcess.start(in: scratch.path, arguments: ["--attempts", "1"])
        let first = [server.url("/img/first.png"), server.url("/flaky/one.png?fail=1")].joined(separator: "\n") + "\n"
        let second = [server.url("/img/second.png"), server.url("/flaky/two.png?fail=1")].joined(separator: "\n") + "\n"
        try daemon.drop("twice.txt", first)
        #expect(try #require(await daemon.finishedList("twice.txt"))["state"] as? String == "failed")
        try daemon.drop("twice.txt", second)
        // Both lists are named twice.txt; the second went to failed/ under the next free name.
        let settled = await eventually(timeout: .seconds(10)) {
            try await daemon.lists().filter { $0["name"] as? String == "twice.txt" && $0["state"] as? String == "failed" }.count == 2
        }
        try #require(settled, "log: \(daemon.log)")
        let failedFolder = daemon.spool + "/failed/"
        #expect(try String(contentsOfFile: failedFolder + "twice.txt", encoding: .utf8) == first)
        #expect(try String(contentsOfFile: failedFolder + "twice.2.txt", encoding: .utf8) == second)
        #expect(FileManager.default.fileExists(atPath: failedFolder + "twice.2.txt.report.json"))

        // `retry` names the most recent list of that name: the second.
        let retried = try await daemon.result(#"{"cmd":"retry","list":"twice.txt"}"#)
        #expect(retried["requeued"] as? Int == 1)
        let done = await eventually(timeout: .seconds(10)) { try await daemon.list("twice.txt")?["state"] as? String == "done" }
        try #require(done, "log: \(daemon.log)")
        #expect(server.requestCount("/flaky/two.png?fail=1") == 2)
        #expect(server.requestCount("/flaky/one.png?fail=1") == 1)
        #expect((try? String(contentsOfFile: daemon.spool + "/done/twice.txt", encoding: .utf8)) == second)
        #expect(await daemon.report("twice.txt", in: "done")?["state"] as? String == "done")
        // The first list is untouched: still failed, its file and report where they were.
        #expect((try? String(contentsOfFile: failedFolder + "twice.txt", encoding: .utf8)) == first)
        #expect(await daemon.report("twice.txt", in: "failed", timeout: .zero)?["state"] as? String == "failed")
        // Nothing of the second list is left in failed/.
        #expect(!FileManager.default.fileExists(atPath: failedFolder + "twice.2.txt"))
        #expect(!FileManager.default.fileExists(atPath: failedFolder + "twice.2.txt.report.json"))
        #expect(await daemon.stop() == 0)
        try await server.shutdown()
    }

    @Test("retry {list} with nothing to fetch again (bad lines, a broken list's syntax): nothing requeued, the list stays failed")
    func retryNothingToFetch() async throws {
        let server = try await TestHTTPServer.start()
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let daemon = try await DaemonProcess.start(in: scratch.path)
        // A JSON list cut short: its one URL is cached, then the syntax breaks (bad_list).
        try daemon.drop("cut.json", #"[""# + server.url("/img/cut.png") + #"", "#)
        // A text list whose only failure is a bad line (bad_url).
        try daemon.drop("bad.txt", server.url("/img/fine.png") + "\nnot a url\n")
        for (name, code) in [("cut.json", "bad_list"), ("bad.txt", "bad_url")] {
            let list = try #require(await daemon.finishedList(name), "log: \(daemon.log)")
            #expect(list["state"] as? String == "failed")
            #expect(list["cached"] as? Int == 1)
            let report = try #require(await daemon.report(name, in: "failed"))
            #expect(report["failed_by_code"] as? [String: Int] == [code: 1])

            let retried = try await daemon.result(#"{"cmd":"retry","list":"\#(name)"}"#)
            #expect(retried["requeued"] as? Int == 0, "\(name)")
            let after = await daemon.finishedList(name, timeout: .seconds(3))
            let current = try await daemon.list(name)
            #expect(after?["state"] as? String == "failed", "\(name) did not stay finished: \(String(describing: current))")
            let failures = try await daemon.result(#"{"cmd":"failed","list":"\#(name)"}"#)["failures"] as? [[String: Any]]
            #expect(failures?.map { $0["code"] as? String } == [code], "\(name)")
            #expect(FileManager.default.fileExists(atPath: daemon.spool + "/failed/" + name), "\(name)")
            #expect(await daemon.report(name, in: "failed", timeout: .zero)?["state"] as? String == "failed", "\(name)")
        }
        #expect(await daemon.stop() == 0)
        try await server.shutdown()
    }

    @Test("cancel {list}: a running list ends cancelled, in failed/, with a report saying so")
    func cancelList() async throws {
        let server = try await TestHTTPServer.start()
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let daemon = try await DaemonProcess.start(in: scratch.path)
        let targets = (0..<50).map { "/img/held\($0).png?gate=held" }
        try daemon.drop("held.txt", targets.map(server.url).joined(separator: "\n") + "\n")
        try #require(await server.waitForInFlight(atLeast: 1, timeout: .seconds(30)), "log: \(daemon.log)")
        #expect(try await daemon.list("held.txt")?["state"] as? String == "active")

        let unknown = try await daemon.call(#"{"cmd":"cancel","list":"nope.txt"}"#)
        #expect((unknown["error"] as? [String: Any])?["code"] as? String == "not_found")
        let cancelled = try await daemon.result(#"{"cmd":"cancel","list":"held.txt"}"#)
        #expect(cancelled["cancelled"] as? Int == 50)

        let list = try #require(await daemon.finishedList("held.txt"), "log: \(daemon.log)")
        #expect(list["state"] as? String == "cancelled")
        #expect(list["failed"] as? Int == 50)
        #expect(list["pending"] as? Int == 0)
        let report = try #require(await daemon.report("held.txt", in: "failed"), "log: \(daemon.log)")
        #expect(report["state"] as? String == "cancelled")
        #expect(report["failed_by_code"] as? [String: Int] == ["cancelled": 50])
        #expect(FileManager.default.fileExists(atPath: daemon.spool + "/failed/held.txt"))
        server.openGate("held")
        #expect(await daemon.stop() == 0)
        try await server.shutdown()
    }

    @Test("subscribe: list_claimed, fetched for each URL and list_done, in increasing seq")
    func subscribedEvents() async throws {
        let server = try await TestHTTPServer.start()
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let daemon = try await DaemonProcess.start(in: scratch.path)
        let events = try await daemon.subscribe()
        defer { events.close() }
        let targets = (0..<5).map { "/img/e\($0).png?w=\(10 + $0)" }
        try daemon.drop("ev.txt", targets.map(server.url).joined(separator: "\n") + "\n")
        let done = try #require(await events.listDone("ev.txt"), "log: \(daemon.log)")
        let received = events.events

        let seqs = received.map(\.seq)
        #expect(seqs == seqs.sorted() && Set(seqs).count == seqs.count, "\(seqs)")
        let claimed = try #require(received.first { $0.name == "list_claimed" })
        #expect(claimed.data["name"] as? String == "ev.txt")
        #expect(claimed.data["total"] as? Int == 5)
        let fetched = received.filter { $0.name == "fetched" }
        let expected = try Set(targets.map { try ImageURL(server.url($0)).normalized })
        #expect(Set(fetched.compactMap { $0.data["url"] as? String }) == expected)
        #expect(fetched.count == 5)
        for event in fetched {
            let target = (event.data["url"] as? String).map { String($0.dropFirst(server.origin.count)) } ?? ""
            #expect(event.data["bytes"] as? Int == TestHTTPServer.body(for: target)?.count, "\(event.line)")
            #expect(event.data["format"] as? String == "png", "\(event.line)")
            #expect(claimed.seq < event.seq && event.seq < done.seq)
        }
        #expect(done.data["state"] as? String == "done")
        #expect(done.data["cached"] as? Int == 5)
        #expect(done.data["already_cached"] as? Int == 0)
        #expect(done.data["failed"] as? Int == 0)
        #expect(await daemon.stop() == 0)
        try await server.shutdown()
    }
}

// MARK: - Helpers

/// The bytes the cache holds for `url`, found by the layout `cache/ab/<sha256 of the normalised URL>`.
func cachedBytes(_ scratch: ScratchFolder, _ url: String) throws -> [UInt8]? {
    let key = try ImageURL(url).cacheKey
    return FileManager.default.contents(atPath: scratch.path + "/imgd-data/cache/" + key.relativePath).map(Array.init)
}

/// Runs `sqlite3 database query` and returns its output, trimmed.
func sqlite(_ database: String, _ query: String) async throws -> String {
    try await ChildProcess.run("/usr/bin/sqlite3", [database, query]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
}

/// A number a polling closure records for the test to read afterwards.
private final class Settled: @unchecked Sendable {
    /// Written and read by one test task at a time (the poll, then the test).
    var value = 0
}
