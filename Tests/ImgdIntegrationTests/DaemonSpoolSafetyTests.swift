import Foundation
import ImgdCore
import ImgdTestSupport
import Testing

/// The spool against a careless or hostile member of its group (Protocol.md, *Spool*): the real
/// `imgd`, real inotify, entries made with the system calls a member would use.
@Suite("Daemon spool safety (the real imgd)", .serialized)
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
    var environment = ProcessInfo.processInfo.environment
    environment["IMGD_SOCKET"] = nil
    return try await ChildProcess.run(imgctlBinary, arguments, in: folder, environment: environment, timeout: .seconds(60))
}
