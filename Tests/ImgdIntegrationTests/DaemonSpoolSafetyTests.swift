import Foundation
import ImgdCore
import ImgdTestSupport
import Testing

/// The spool against a careless or hostile member of its group (Protocol.md, *Spool*): the real
/// `imgd`, real inotify, entries made with the system calls a member would use.
@Suite("Daemon spool safety (the real imgd)", .serialized, .timeLimit(.minutes(10)), .offThePool)
struct DaemonSpoolSafetyTests {
    // MARK: - Clean output

    @Test("a list named `evil\\n<0>imgd: FAKE EMERGENCY` forges no journald line; imgctl lists shows it escaped, the JSON reply as it is")
    func forgedJournalLine() async throws {
        let server = try await TestHTTPServer.start()
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        // stderr is imgd.log (truncated in place when the daemon starts): its device and inode
        // are the journal stream, so the daemon writes priorities as under systemd.
        let logPath = scratch.path + "/imgd.log"
        try #require(FileManager.default.createFile(atPath: logPath, contents: nil))
        var info = stat()
        try #require(stat(logPath, &info) == 0)
        let daemon = try await DaemonProcess.start(
            in: scratch.path, environment: ["JOURNAL_STREAM": "\(info.st_dev):\(info.st_ino)"])
        let name = "evil\n<0>imgd: FAKE EMERGENCY"
        try daemon.drop(name, server.url("/img/evil.png") + "\n")
        let list = try #require(await daemon.finishedList(name), "log: \(daemon.log)")
        #expect(list["state"] as? String == "done")

        let lines = daemon.log.split(separator: "\n")
        #expect(lines.contains { $0.hasPrefix("<6>") }, "priorities are not on: \(daemon.log)")
        #expect(!lines.contains { $0.hasPrefix("<0>") || $0.hasPrefix("imgd: FAKE") }, "log: \(daemon.log)")
        #expect(lines.contains { $0.contains(#"evil\n<0>imgd: FAKE EMERGENCY"#) }, "log: \(daemon.log)")

        let shown = try await runImgctl(["lists", "--socket", daemon.socket], in: scratch.path)
        #expect(shown.status == 0, "\(shown.stderr)")
        #expect(shown.stdout.contains(#"evil\n<0>imgd: FAKE EMERGENCY  done"#), "\(shown.stdout)")
        #expect(!shown.stdout.contains("\n<0>"))
        let json = try await runImgctl(["lists", "--json", "--socket", daemon.socket], in: scratch.path)
        #expect(json.stdout.contains(#""name":"evil\n<0>imgd: FAKE EMERGENCY""#), "\(json.stdout)")
        #expect(await daemon.stop() == 0)
        try await server.shutdown()
    }

    @Test("ESC sequences in a list's URLs reach imgctl's output escaped (failed --list), raw in --json")
    func escapeSequenceInURL() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let daemon = try await DaemonProcess.start(in: scratch.path)
        try daemon.drop("esc.txt", "http://127.0.0.1:1/\u{1B}[2J\u{1B}]0;owned\u{7}x.png\n")
        let list = try #require(await daemon.finishedList("esc.txt"), "log: \(daemon.log)")
        #expect(list["failed"] as? Int == 1)

        let shown = try await runImgctl(["failed", "--list", "esc.txt", "--socket", daemon.socket], in: scratch.path)
        #expect(shown.status == 0, "\(shown.stderr)")
        #expect(shown.stdout.contains(#"http://127.0.0.1:1/\x1b[2J\x1b]0;owned\x07x.png"#), "\(shown.stdout)")
        #expect(!shown.stdout.contains("\u{1B}") && !shown.stdout.contains("\u{7}"))
        #expect(!daemon.log.contains("\u{1B}"), "log: \(daemon.log)")
        let json = try await runImgctl(["failed", "--list", "esc.txt", "--json", "--socket", daemon.socket], in: scratch.path)
        #expect(json.stdout.contains(#"\u001b[2J"#), "\(json.stdout)")
        #expect(await daemon.stop() == 0)
    }

    // MARK: - Lists replaced or misnamed

    @Test("a list replaced by a symlink while it is claimed: nothing but regular files in .claimed/, done/ or failed/, the target untouched, a report saying why")
    func replacedWhileClaimed() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let daemon = try await DaemonProcess.start(in: scratch.path)
        let secret = scratch.path + "/secret"
        try "secret\n".write(toFile: secret, atomically: false, encoding: .utf8)
        // 3 million lines: many seconds of claiming, time enough to swap the name.
        try await daemon.dropNumberedURLs("long.txt", count: 3_000_000)
        let claiming = await eventually(timeout: .seconds(20)) {
            (try await daemon.list("long.txt")?["total"] as? Int ?? 0) > 0
        }
        try #require(claiming, "log: \(daemon.log)")
        // The name swapped for a symlink (made under a dot name the daemon ignores, renamed over).
        try #require(symlink(secret, daemon.spool + "/.evil") == 0)
        try #require(rename(daemon.spool + "/.evil", daemon.spool + "/long.txt") == 0)
        try #require(try await daemon.list("long.txt")?["state"] as? String == "claiming", "the claim ended before the swap")

        // The claim reads on to its end before it finds the swap: waited for while it makes
        // progress (minutes under ThreadSanitizer), then the report.
        let reportPath = daemon.spool + "/failed/long.txt.report.json"
        let claimed = await eventuallyWhileProgressing {
            let total = try await daemon.list("long.txt")?["total"] as? Int ?? 0
            return (total, FileManager.default.fileExists(atPath: reportPath))
        }
        #expect(claimed, "log: \(daemon.log)")
        let report = try #require(await daemon.report("long.txt", in: "failed", timeout: .seconds(30)), "log: \(daemon.log)")
        #expect(report["state"] as? String == "refused")
        #expect((report["reason"] as? String)?.contains("replaced while being claimed (by a symbolic link)") == true, "\(report)")
        #expect(try await daemon.list("long.txt") == nil)
        for sub in [".claimed", "done", "failed"] {
            for name in try FileManager.default.contentsOfDirectory(atPath: daemon.spool + "/" + sub) {
                var info = stat()
                #expect(lstat(daemon.spool + "/\(sub)/\(name)", &info) == 0 && (info.st_mode & S_IFMT) == S_IFREG, "\(sub)/\(name)")
            }
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: daemon.spool + "/.claimed").isEmpty)
        #expect(try String(contentsOfFile: secret, encoding: .utf8) == "secret\n")
        #expect(await daemon.stop() == 0)
    }

    @Test("a list named `x.report.json` is refused (moved aside as `x.report.json.list`), so the report of list `x` cannot replace it")
    func listNamedLikeAReport() async throws {
        let server = try await TestHTTPServer.start()
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let daemon = try await DaemonProcess.start(in: scratch.path)
        let failed = daemon.spool + "/failed"
        let bLines = server.url("/img/b.png") + "\n"
        try daemon.drop("x.report.json", bLines)
        let refusal = try #require(await daemon.report("x.report.json.list", in: "failed"), "log: \(daemon.log)")
        #expect(refusal["code"] as? String == "bad_list")
        #expect((refusal["reason"] as? String)?.contains("ends in .report.json") == true, "\(refusal)")
        #expect(try String(contentsOfFile: failed + "/x.report.json.list", encoding: .utf8) == bLines)

        try daemon.drop("x", server.url("/status/404") + "\n")
        #expect(await daemon.finishedList("x")?["state"] as? String == "failed", "log: \(daemon.log)")
        let report = try #require(await daemon.report("x", in: "failed"))
        #expect(report["name"] as? String == "x" && report["state"] as? String == "failed")
        #expect(try String(contentsOfFile: failed + "/x.report.json.list", encoding: .utf8) == bLines)
        #expect(await daemon.stop() == 0)
        try await server.shutdown()
    }

    // MARK: - The daemon's own folders

    @Test("done/, failed/ and .claimed/ replaced at run time (renamed away, a symlink, a member's folder): made anew, lists land in the real ones")
    func subfoldersReplacedAtRunTime() async throws {
        let server = try await TestHTTPServer.start()
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let daemon = try await DaemonProcess.start(in: scratch.path)
        let spool = daemon.spool
        try daemon.drop("first.txt", server.url("/img/first.png") + "\n")
        #expect(await daemon.finishedList("first.txt")?["state"] as? String == "done", "log: \(daemon.log)")

        // done/ renamed away; failed/ a symlink to a folder outside; .claimed/ a member's folder.
        // (Renamed to dot names, which the daemon ignores: another name would be a folder dropped
        // in the spool, refused by itself.)
        let outside = scratch.path + "/outside"
        try #require(mkdir(outside, 0o777) == 0)
        try #require(rename(spool + "/done", spool + "/.done.old") == 0)
        try #require(rename(spool + "/failed", spool + "/.failed.old") == 0)
        try #require(symlink(outside, spool + "/failed") == 0)
        try #require(rename(spool + "/.claimed", spool + "/.claimed.old") == 0)
        try #require(mkdir(spool + "/.claimed", 0o777) == 0)
        try #require(chown(spool + "/.claimed", 65534, 65534) == 0)
        try "planted".write(toFile: spool + "/.claimed/planted", atomically: false, encoding: .utf8)
        try #require(chown(spool + "/.claimed/planted", 65534, 65534) == 0)

        try daemon.drop("good.txt", server.url("/img/good.png") + "\n")
        try daemon.drop("bad.txt", server.url("/status/404") + "\n")
        #expect(await daemon.finishedList("good.txt")?["state"] as? String == "done", "log: \(daemon.log)")
        #expect(await daemon.finishedList("bad.txt")?["state"] as? String == "failed", "log: \(daemon.log)")

        for (sub, list) in [("done", "good.txt"), ("failed", "bad.txt")] {
            #expect(Self.isOwnFolder(spool + "/" + sub), "\(sub)/ is not a real folder of the daemon's")
            #expect(FileManager.default.fileExists(atPath: spool + "/\(sub)/\(list)"), "log: \(daemon.log)")
            #expect(FileManager.default.fileExists(atPath: spool + "/\(sub)/\(list).report.json"))
        }
        #expect(Self.isOwnFolder(spool + "/.claimed"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: outside).isEmpty)
        #expect(try FileManager.default.contentsOfDirectory(atPath: spool + "/.done.old").sorted() == ["first.txt", "first.txt.report.json"])
        // The member's folder, with what they put in it, is moved aside (hidden), never used.
        #expect(FileManager.default.fileExists(atPath: spool + "/.claimed.replaced/planted"), "\(daemon.spoolNames())")
        for sub in ["done", "failed", ".claimed"] {
            #expect(daemon.log.contains("/\(sub) was replaced ("), "log: \(daemon.log)")
        }
        #expect(await daemon.stop() == 0)
        try await server.shutdown()
    }

    @Test("a symlink planted as done/ while the daemon is stopped: removed at start, done/ made anew, the target untouched")
    func subfolderReplacedAtStart() async throws {
        let server = try await TestHTTPServer.start()
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        var daemon = try await DaemonProcess.start(in: scratch.path)
        let spool = daemon.spool
        #expect(await daemon.stop() == 0)
        let outside = scratch.path + "/outside"
        try #require(mkdir(outside, 0o777) == 0)
        try #require(rmdir(spool + "/done") == 0)
        try #require(symlink(outside, spool + "/done") == 0)

        daemon = try await DaemonProcess.start(in: scratch.path)
        #expect(Self.isOwnFolder(spool + "/done"))
        #expect(daemon.log.contains("/done was replaced (a symbolic link, removed)"), "log: \(daemon.log)")
        try daemon.drop("good.txt", server.url("/img/good.png") + "\n")
        #expect(await daemon.finishedList("good.txt")?["state"] as? String == "done", "log: \(daemon.log)")
        #expect(FileManager.default.fileExists(atPath: spool + "/done/good.txt"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: outside).isEmpty)
        #expect(await daemon.stop() == 0)
        try await server.shutdown()
    }

    // MARK: - Refused entries

    @Test("a FIFO, a symlink to /etc/shadow, a socket and a device: removed from the spool, never moved, each reported; cat failed/* does not block")
    func refusedEntriesRemoved() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let daemon = try await DaemonProcess.start(in: scratch.path)
        let spool = daemon.spool
        var shadow = stat()
        let hasShadow = lstat("/etc/shadow", &shadow) == 0
        try #require(mkfifo(spool + "/pipe.txt", 0o666) == 0)
        try #require(symlink("/etc/shadow", spool + "/shadow.txt") == 0)
        let socketFD = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(socketFD) }
        try #require(try UnixSocketAddress(path: spool + "/socket.txt").bind(socketFD) == 0)
        let kinds = ["pipe.txt": "a FIFO", "shadow.txt": "a symbolic link", "socket.txt": "a socket"]
        var expected = kinds
        if getuid() == 0, mknod(spool + "/device.txt", S_IFCHR | 0o666, 259) == 0 {
            expected["device.txt"] = "a device"  // 1:3, /dev/null's numbers
        }

        for (name, kind) in expected.sorted(by: { $0.key < $1.key }) {
            let report = try #require(await daemon.report(name, in: "failed"), "no report for \(name); log: \(daemon.log)")
            #expect(report["state"] as? String == "refused")
            #expect((report["reason"] as? String)?.contains("it is \(kind)") == true, "\(report)")
            #expect((report["reason"] as? String)?.contains("removed from the spool") == true, "\(report)")
            var info = stat()
            #expect(lstat(spool + "/" + name, &info) != 0, "\(name) is still in the spool")
            #expect(lstat(spool + "/failed/" + name, &info) != 0, "\(name) was moved to failed/")
        }
        // Only reports in failed/: reading them all cannot block on a FIFO or follow a link.
        let failed = try FileManager.default.contentsOfDirectory(atPath: spool + "/failed")
        #expect(failed.allSatisfy { $0.hasSuffix(".report.json") }, "\(failed)")
        let cat = try await ChildProcess.run(
            "/bin/sh", ["-c", "cat failed/* > /dev/null"], in: spool, environment: [:], timeout: .seconds(10))
        #expect(cat.status == 0, "cat failed/*: \(cat.status) \(cat.stderr)")
        if hasShadow {
            var after = stat()
            #expect(lstat("/etc/shadow", &after) == 0 && after.st_ino == shadow.st_ino && after.st_size == shadow.st_size)
        }
        #expect(try await daemon.lists().isEmpty)
        #expect(await daemon.stop() == 0)
    }

    @Test("a folder dropped in the spool is left in place and reported once per run, however often it is seen")
    func folderReportedOnce() async throws {
        let server = try await TestHTTPServer.start()
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let daemon = try await DaemonProcess.start(in: scratch.path)
        let spool = daemon.spool
        try #require(mkdir(spool + "/folder.txt", 0o755) == 0)
        let report = try #require(await daemon.report("folder.txt", in: "failed"), "log: \(daemon.log)")
        #expect((report["reason"] as? String)?.contains("it is a folder") == true, "\(report)")
        // Seen again: moved away (under a name the daemon ignores) and back, twice.
        for _ in 0..<2 {
            try #require(rename(spool + "/folder.txt", spool + "/.folder.hidden") == 0)
            try #require(rename(spool + "/.folder.hidden", spool + "/folder.txt") == 0)
        }
        // The claimer takes names in the order they were seen: once this list is done, the
        // folder's second and third sightings have been handled.
        try daemon.drop("after.txt", server.url("/img/after.png") + "\n")
        #expect(await daemon.finishedList("after.txt")?["state"] as? String == "done", "log: \(daemon.log)")

        var info = stat()
        #expect(lstat(spool + "/folder.txt", &info) == 0 && (info.st_mode & S_IFMT) == S_IFDIR)
        let reports = try FileManager.default.contentsOfDirectory(atPath: spool + "/failed").filter { $0.hasPrefix("folder") }
        #expect(reports == ["folder.txt.report.json"], "\(reports)")
        #expect(daemon.log.split(separator: "\n").filter { $0.contains("list refused in the spool: ") && $0.hasSuffix(" list=folder.txt") }.count == 1,
                "log: \(daemon.log)")
        #expect(await daemon.stop() == 0)
        try await server.shutdown()
    }

    @Test("a hard link dropped in the spool is refused at once (no restart): the link removed, the file it shares untouched, nothing fetched")
    func hardLinkRefused() async throws {
        let server = try await TestHTTPServer.start()
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let daemon = try await DaemonProcess.start(in: scratch.path)
        // A readable list stands in for a file the dropper could not read: the link is what counts.
        let outside = scratch.path + "/private.txt"
        try (server.url("/img/private.png") + "\n").write(toFile: outside, atomically: false, encoding: .utf8)
        try #require(link(outside, daemon.spool + "/hard.txt") == 0)

        let report = try #require(await daemon.report("hard.txt", in: "failed"), "log: \(daemon.log)")
        #expect(report["state"] as? String == "refused")
        #expect((report["reason"] as? String)?.contains("2 links") == true, "\(report)")
        var info = stat()
        #expect(lstat(daemon.spool + "/hard.txt", &info) != 0)
        #expect(lstat(daemon.spool + "/failed/hard.txt", &info) != 0)
        #expect(lstat(outside, &info) == 0 && info.st_nlink == 1)
        #expect(try await daemon.lists().isEmpty)
        #expect(server.totalRequests == 0)
        #expect(await daemon.stop() == 0)
        try await server.shutdown()
    }

    // MARK: - Lists that are never silent

    @Test("a list whose name is not UTF-8 is claimed by its bytes and reported under its escaped name")
    func invalidUTF8Name() async throws {
        let server = try await TestHTTPServer.start()
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let daemon = try await DaemonProcess.start(in: scratch.path)
        try daemon.dropBytes(Array("bad".utf8) + [0xFF, 0xFE] + Array(".txt".utf8), server.url("/img/bad.png") + "\n")
        let shown = #"bad\xff\xfe.txt"#
        let list = try #require(await daemon.finishedList(shown), "log: \(daemon.log)")
        #expect(list["state"] as? String == "done")
        #expect(list["cached"] as? Int == 1)
        let report = try #require(await daemon.report(shown, in: "done"))
        #expect(report["name"] as? String == shown)
        #expect(FileManager.default.fileExists(atPath: daemon.spool + "/done/" + shown))
        #expect(daemon.spoolNames().filter { !$0.hasPrefix(".") } == ["done", "failed"])
        #expect(await daemon.stop() == 0)
        try await server.shutdown()
    }

    @Test("a list placed by a link that nothing closes (linkat of an O_TMPFILE, still open) is claimed at once")
    func linkPlacedList() async throws {
        let server = try await TestHTTPServer.start()
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let daemon = try await DaemonProcess.start(in: scratch.path)
        let fd = open(daemon.spool, Self.tmpFile | O_WRONLY, 0o644)
        try #require(fd >= 0, "O_TMPFILE: \(String(cString: strerror(errno)))")
        defer { close(fd) }
        let text = Array((server.url("/img/linked.png") + "\n").utf8)
        try #require(text.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) } == text.count)
        try #require(linkat(AT_FDCWD, "/proc/self/fd/\(fd)", AT_FDCWD, daemon.spool + "/linked.txt", AT_SYMLINK_FOLLOW) == 0)
        // The writer still holds the file open: no close event has come or will come before this.
        let list = try #require(await daemon.finishedList("linked.txt", timeout: .seconds(10)), "log: \(daemon.log)")
        #expect(list["state"] as? String == "done")
        #expect(list["cached"] as? Int == 1)
        #expect(await daemon.stop() == 0)
        try await server.shutdown()
    }

    @Test("ln then rm of the source: handled at once, claimed or refused with a report, never left waiting for a restart")
    func lnThenRemove() async throws {
        let server = try await TestHTTPServer.start()
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let daemon = try await DaemonProcess.start(in: scratch.path)
        let source = scratch.path + "/ln.txt"
        try (server.url("/img/ln.png") + "\n").write(toFile: source, atomically: false, encoding: .utf8)
        try #require(link(source, daemon.spool + "/ln.txt") == 0)
        try #require(unlink(source) == 0)
        // Whether the daemon looked while the file had two links (refused) or one (claimed)
        // depends on timing; either way it is handled now, not at the next start.
        let handled = await eventually(timeout: .seconds(10)) {
            FileManager.default.fileExists(atPath: daemon.spool + "/failed/ln.txt.report.json")
                || FileManager.default.fileExists(atPath: daemon.spool + "/done/ln.txt.report.json")
        }
        #expect(handled, "log: \(daemon.log)")
        #expect(!daemon.spoolNames().contains("ln.txt"))
        #expect(await daemon.stop() == 0)
        try await server.shutdown()
    }

    @Test("names of 250 and 255 bytes: claimed and reported under a shortened file name; a restart logs no File name too long")
    func longNames() async throws {
        let server = try await TestHTTPServer.start()
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        var daemon = try await DaemonProcess.start(in: scratch.path)
        let name250 = String(repeating: "a", count: 246) + ".txt"
        try daemon.drop(name250, server.url("/img/long250.png") + "\n")
        // 255 bytes: no `.NAME.tmp` can exist, so written in place (claimed at its close).
        let name255 = String(repeating: "b", count: 251) + ".txt"
        let fd = open(daemon.spool + "/" + name255, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        try #require(fd >= 0, "\(String(cString: strerror(errno)))")
        let text = Array((server.url("/img/long255.png") + "\n").utf8)
        #expect(text.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) } == text.count)
        close(fd)

        for name in [name250, name255] {
            let list = try #require(await daemon.finishedList(name), "log: \(daemon.log)")
            #expect(list["state"] as? String == "done")
            #expect(list["cached"] as? Int == 1)
        }
        let done = try FileManager.default.contentsOfDirectory(atPath: daemon.spool + "/done")
        #expect(done.count == 4, "\(done)")
        #expect(done.allSatisfy { $0.utf8.count <= 255 })
        for (prefix, name) in [("aaaa", name250), ("bbbb", name255)] {
            let report = try #require(done.first { $0.hasPrefix(prefix) && $0.hasSuffix(".report.json") }, "\(done)")
            let data = try #require(FileManager.default.contents(atPath: daemon.spool + "/done/" + report))
            let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
            #expect(object["name"] as? String == name)
        }
        #expect(daemon.spoolNames().filter { !$0.hasPrefix(".") } == ["done", "failed"])
        #expect(await daemon.stop() == 0)
        daemon = try await DaemonProcess.start(in: scratch.path)
        #expect(await daemon.stop() == 0)
        #expect(!daemon.log.contains("too long"), "log: \(daemon.log)")
        try await server.shutdown()
    }

    /// `O_TMPFILE` (`__O_TMPFILE | O_DIRECTORY`), which Swift's Glibc module does not declare.
    static let tmpFile: Int32 = 0o20_000_000 | O_DIRECTORY

    /// A folder (not a symlink) owned by this process's user, as the daemon run by the tests makes.
    static func isOwnFolder(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFDIR && info.st_uid == geteuid()
    }
}

/// `imgctl`, built beside `imgd`.
private let imgctlBinary = URL(fileURLWithPath: BinaryRunner.imgdPath).deletingLastPathComponent().appendingPathComponent("imgctl").path

/// Runs `imgctl` with `arguments` in `folder`; its output and exit status.
private func runImgctl(_ arguments: [String], in folder: String) async throws -> ChildProcess.Output {
    try await ChildProcess.run(imgctlBinary, arguments, in: folder, environment: BinaryRunner.imgctlEnvironment, timeout: .seconds(60))
}

extension DaemonProcess {
    /// Drops a list under a name given as bytes (not necessarily UTF-8): written as a temp file,
    /// then renamed into place.
    func dropBytes(_ name: [UInt8], _ contents: String) throws {
        let temp = spool + "/.bytes.tmp"
        try Data(contents.utf8).write(to: URL(fileURLWithPath: temp))
        let target = Array((spool + "/").utf8) + name + [0]
        let result = target.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { rename(temp, $0.baseAddress!) }
        }
        guard result == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
    }
}
