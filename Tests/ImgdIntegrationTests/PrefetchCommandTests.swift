import Foundation
import ImgdCore
import ImgdTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `imgd prefetch` end to end: the real binary, the real test server, real files.
@Suite("imgd prefetch (the binary)", .timeLimit(.minutes(10)), .offThePool)
struct PrefetchCommandTests {
    @Test("every URL cached: exit 0, summary on stdout, files byte-exact; a second run finds them cached")
    func allCached() async throws {
        let server = try await TestHTTPServer.start()
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let targets = (0..<40).map { "/img/ok\($0).png?w=\(8 + $0)&h=8" }
        try scratch.write("list.txt", "# forty images\n" + targets.map(server.url).joined(separator: "\n") + "\n")

        let first = try await BinaryRunner.imgd(["prefetch", "list.txt", "--cache", "cache", "--max-parallel", "4"], in: scratch.path)
        #expect(first.status == 0, "stderr: \(first.stderr)")
        #expect(first.stdout.contains("40 URLs in 1 list: 40 downloaded"))
        #expect(first.stdout.contains("0 failed"))
        #expect(scratch.files(under: "cache").count == 40)
        for target in targets {
            let key = try ImageURL(server.url(target)).cacheKey
            let bytes = try Data(contentsOf: URL(fileURLWithPath: scratch.path + "/cache/" + key.relativePath))
            #expect(Array(bytes) == TestHTTPServer.body(for: target))
        }
        #expect(server.maxInFlight <= 4)
        // Closed cleanly: the index is whole in its one file, no WAL or shared-memory file left
        // beside it to be copied along (a commit timer that outlived the run kept the index
        // open at exit, so SQLite never removed them).
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: scratch.path + "/cache").filter { $0.hasPrefix("index.sqlite-") }
        #expect(leftovers.isEmpty)

        let second = try await BinaryRunner.imgd(["prefetch", "list.txt", "--cache", "cache"], in: scratch.path)
        #expect(second.status == 0)
        #expect(second.stdout.contains("0 downloaded (0 B), 40 already cached"))
        #expect(server.totalRequests == 40)
        try await server.shutdown()
    }

    @Test("its exit does not wait for the disk: the stop is recorded clean for this boot, and a daemon started then trusts the entries")
    func stopIsCleanForThisBoot() async throws {
        let server = try await TestHTTPServer.start()
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try scratch.write("list.txt", server.url("/img/a.png") + "\n" + server.url("/img/b.png") + "\n")
        let run = try await BinaryRunner.imgd(["prefetch", "list.txt", "--cache", "cache"], in: scratch.path)
        #expect(run.status == 0, "stderr: \(run.stderr)")
        let meta = try await ChildProcess.run("/usr/bin/sqlite3", [
            scratch.path + "/cache/index.sqlite",
            "SELECT name, value FROM meta WHERE name IN ('clean', 'unsynced_stop_boot') ORDER BY name",
        ])
        // The boot ID's first 16 hex digits, as a signed 64-bit number.
        let bootID = try String(contentsOfFile: "/proc/sys/kernel/random/boot_id", encoding: .utf8)
        let digits = String(bootID.filter(\.isHexDigit).prefix(16))
        let boot = Int(truncatingIfNeeded: try #require(UInt64(digits, radix: 16)))
        #expect(meta.stdout == "clean|1\nunsynced_stop_boot|\(boot)\n", "\(meta.stdout) \(meta.stderr)")

        // A daemon started in the same boot finds a clean stop (no warning, no checks).
        let daemon = try await DaemonProcess.start(in: scratch.path, arguments: ["--cache", scratch.path + "/cache"])
        defer { daemon.killIfRunning() }
        let hit = try await daemon.result(jsonLine(["cmd": "get", "url": server.url("/img/a.png"), "fetch": false]))
        #expect(hit["source"] as? String == "disk", "\(hit)")
        #expect(!daemon.log.contains("did not stop cleanly"), "\(daemon.log)")
        #expect(await daemon.stop() == 0)
        #expect(server.totalRequests == 2)
        try await server.shutdown()
    }

    @Test("after a restart the daemon says the prefetch's stop did not sync; with --sync a prefetch records no boot at all")
    func syncFlagAndRestart() async throws {
        let server = try await TestHTTPServer.start()
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try scratch.write("list.txt", server.url("/img/a.png") + "\n")
        let run = try await BinaryRunner.imgd(["prefetch", "list.txt", "--cache", "cache"], in: scratch.path)
        #expect(run.status == 0, "stderr: \(run.stderr)")
        // The machine "restarts": the record names another boot.
        let index = scratch.path + "/cache/index.sqlite"
        let edited = try await ChildProcess.run("/usr/bin/sqlite3", [index, "UPDATE meta SET value = value + 1 WHERE name = 'unsynced_stop_boot'"])
        try #require(edited.status == 0, "\(edited.stderr)")
        let daemon = try await DaemonProcess.start(in: scratch.path, arguments: ["--cache", scratch.path + "/cache"])
        defer { daemon.killIfRunning() }
        let hit = try await daemon.result(jsonLine(["cmd": "get", "url": server.url("/img/a.png"), "fetch": false]))
        #expect(hit["source"] as? String == "disk", "checked, and found whole: \(hit)")
        #expect(daemon.log.contains("did not sync, and the machine has restarted since"), "\(daemon.log)")
        #expect(!daemon.log.contains("did not stop cleanly"), "\(daemon.log)")
        #expect(await daemon.stop() == 0)

        let synced = try await BinaryRunner.imgd(["prefetch", "list.txt", "--cache", "cache", "--sync"], in: scratch.path)
        #expect(synced.status == 0, "stderr: \(synced.stderr)")
        let meta = try await ChildProcess.run("/usr/bin/sqlite3", [index, "SELECT name, value FROM meta WHERE name IN ('clean', 'unsynced_stop_boot') ORDER BY name"])
        #expect(meta.stdout == "clean|1\n", "\(meta.stdout) \(meta.stderr)")
        try await server.shutdown()
    }

    @Test("a cache an earlier version left with another URL's bytes under a URL's key: the first run removes that entry, says so, and fetches the URL again")
    func foreignKeysFromAnEarlierVersion() async throws {
        let server = try await TestHTTPServer.start()
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let victim = server.url("/img/victim.png?seed=1"), evil = server.url("/img/evil.png?seed=2")
        try scratch.write("both.txt", victim + "\n" + evil + "\n")
        let first = try await BinaryRunner.imgd(["prefetch", "both.txt", "--cache", "cache"], in: scratch.path)
        #expect(first.status == 0, "stderr: \(first.stderr)")
        // The evil body as the victim URL's entry, pinned, in a cache whose keys were never checked.
        let victimKey = try ImageURL(victim).cacheKey, evilKey = try ImageURL(evil).cacheKey
        let edited = try await ChildProcess.run("/usr/bin/sqlite3", [scratch.path + "/cache/index.sqlite", """
            DELETE FROM entries WHERE key = x'\(victimKey.hex)';
            UPDATE entries SET key = x'\(victimKey.hex)', pinned_until = 9000000000000000 WHERE key = x'\(evilKey.hex)';
            DELETE FROM meta WHERE name = 'keys_version';
            """])
        try #require(edited.status == 0, "\(edited.stderr)")
        try #require(rename(scratch.path + "/cache/" + evilKey.relativePath, scratch.path + "/cache/" + victimKey.relativePath) == 0)

        try scratch.write("victim.txt", victim + "\n")
        let second = try await BinaryRunner.imgd(["prefetch", "victim.txt", "--cache", "cache"], in: scratch.path)
        #expect(second.status == 0, "stderr: \(second.stderr)")
        #expect(second.stderr.contains("removed 1 cache entries"), "stderr: \(second.stderr)")
        #expect(second.stdout.contains("1 downloaded"), "\(second.stdout)")
        let bytes = try Data(contentsOf: URL(fileURLWithPath: scratch.path + "/cache/" + victimKey.relativePath))
        #expect(Array(bytes) == TestHTTPServer.body(for: "/img/victim.png?seed=1"))
        try await server.shutdown()
    }

    @Test("bad lines and failing URLs: exit 1, each reported with its line or URL and code; the rest cached")
    func failures() async throws {
        let server = try await TestHTTPServer.start()
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let lines = [
            server.url("/img/a.png"),
            "ftp://example.com/x.png",
            "",
            "# a comment",
            server.url("/status/404"),
            "not a url at all",
            server.url("/html"),
            server.url("/img/b.gif"),
        ]
        try scratch.write("links.txt", lines.joined(separator: "\n"))
        let result = try await BinaryRunner.imgd(["prefetch", "links.txt", "--cache", "c"], in: scratch.path)
        #expect(result.status == 1)
        #expect(result.stderr.contains("links.txt:2: bad_url: scheme 'ftp' is not supported"))
        #expect(result.stderr.contains("links.txt:6: bad_url:"))
        #expect(result.stderr.contains("failed: \(server.url("/status/404")): http_404"))
        #expect(result.stderr.contains("failed: \(server.url("/html")): not_image"))
        #expect(result.stdout.contains("4 URLs in 1 list: 2 downloaded"))
        #expect(result.stdout.contains("4 failed (bad_url 2, http_404 1, not_image 1)"))
        #expect(scratch.files(under: "c").count == 2)
        #expect(try FileManager.default.contentsOfDirectory(atPath: scratch.path + "/c/tmp").isEmpty)
        try await server.shutdown()
    }

    @Test("what a list quotes is echoed escaped and cut: no raw ESC or CR reaches the terminal, 8 KiB of junk shows as 512 bytes and a marker")
    func echoesAreEscapedAndCut() async throws {
        let server = try await TestHTTPServer.start()
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let junk = "gopher" + String(repeating: "\u{1B}[2J", count: 2000)
        let lines = [
            "not a url \u{1B}]0;owned\u{07}\rimgd: FAKE",
            junk,
            server.url("/img/a.png"),
        ]
        try scratch.write("links.txt", lines.joined(separator: "\n"))
        let result = try await BinaryRunner.imgd(["prefetch", "links.txt", "--cache", "c"], in: scratch.path)
        #expect(result.status == 1)
        #expect(!result.stderr.utf8.contains(0x1B), "a raw ESC reached stderr")
        #expect(!result.stderr.utf8.contains(0x0D), "a raw CR reached stderr")
        #expect(!result.stderr.utf8.contains(0x07), "a raw BEL reached stderr")
        #expect(result.stderr.contains(#"links.txt:1: bad_url: not a valid URL"#))
        #expect(result.stderr.contains(#"not a url \x1b]0;owned\x07\rimgd: FAKE"#))
        let junkLine = try #require(result.stderr.split(separator: "\n").first { $0.contains("links.txt:2:") })
        #expect(junkLine.utf8.count < 4 * 512 + 200, "the 8 KiB line was echoed whole: \(junkLine.utf8.count) bytes")
        #expect(junkLine.hasSuffix("more bytes]"))
        // Nothing else lost: the good URL after the junk is cached.
        #expect(result.stdout.contains("1 URLs in 1 list: 1 downloaded"))
        #expect(scratch.files(under: "c").count == 1)
        try await server.shutdown()
    }

    @Test("proxy environment variables are not used silently")
    func ignoresProxyEnvironment() async throws {
        let server = try await TestHTTPServer.start()
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try scratch.write("list.txt", server.url("/img/direct.png"))
        // Were these honoured, every request would go to a port where nothing listens.
        let dead = "http://127.0.0.1:9"
        let result = try await BinaryRunner.imgd(
            ["prefetch", "list.txt", "--cache", "c"], in: scratch.path,
            environment: ["http_proxy": dead, "HTTP_PROXY": dead, "https_proxy": dead, "ALL_PROXY": dead, "NO_PROXY": ""])
        #expect(result.status == 0, "stderr: \(result.stderr)")
        #expect(server.requestCount("/img/direct.png") == 1)
        try await server.shutdown()
    }

    @Test("a second imgd on the same cache exits with a clear message; the first is unharmed")
    func singleInstance() async throws {
        let server = try await TestHTTPServer.start()
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try scratch.write("held.txt", server.url("/img/held.png?gate=go"))
        try scratch.write("other.txt", server.url("/img/other.png"))
        let first = try BinaryRunner.launch(["prefetch", "held.txt", "--cache", "c"], in: scratch.path)
        #expect(await server.waitForInFlight(atLeast: 1, timeout: .seconds(20)))
        let second = try await BinaryRunner.imgd(["prefetch", "other.txt", "--cache", "c"], in: scratch.path)
        #expect(second.status == 1)
        #expect(second.stderr.contains("another imgd (pid \(first.pid)) is using this cache"))
        #expect(server.requestCount("/img/other.png") == 0)
        server.openGate("go")
        #expect(await first.exited(within: .seconds(60)) == 0)
        #expect(scratch.files(under: "c").count == 1)
        try await server.shutdown()
    }

    @Test("several lists are read together")
    func severalLists() async throws {
        let server = try await TestHTTPServer.start()
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try scratch.write("one.txt", (0..<5).map { server.url("/img/one\($0).png") }.joined(separator: "\n"))
        try scratch.write("two.txt", (0..<5).map { server.url("/img/two\($0).png") }.joined(separator: "\n"))
        let result = try await BinaryRunner.imgd(["prefetch", "one.txt", "two.txt", "--cache", "c"], in: scratch.path)
        #expect(result.status == 0)
        #expect(result.stdout.contains("10 URLs in 2 lists: 10 downloaded"))
        try await server.shutdown()
    }

    @Test("a missing list is reported and fails the run; the other list still runs")
    func missingList() async throws {
        let server = try await TestHTTPServer.start()
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try scratch.write("ok.txt", server.url("/img/fine.png"))
        let result = try await BinaryRunner.imgd(["prefetch", "nope.txt", "ok.txt", "--cache", "c"], in: scratch.path)
        #expect(result.status == 1)
        #expect(result.stderr.contains("cannot open link list nope.txt: No such file or directory"))
        #expect(scratch.files(under: "c").count == 1)
        try await server.shutdown()
    }

    @Test("--deny adds to the default ranges: a metadata address stays refused, the added range is refused too, nothing else is")
    func denyAddsToDefaults() async throws {
        // On `::`, so that 127.0.0.3 reaches it as well as 127.0.0.1.
        let server = try await TestHTTPServer.start(host: "::")
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        // Literal hosts are refused before any connection, so nothing is sent to 169.254.169.254.
        let other = server.url("/img/allowed.png").replacingOccurrences(of: "127.0.0.1", with: "127.0.0.3")
        try scratch.write("l.txt", ["http://169.254.169.254/latest/meta-data/iam.png", server.url("/img/loop.png"), other].joined(separator: "\n"))
        let result = try await BinaryRunner.imgd(["prefetch", "l.txt", "--cache", "c", "--deny", "127.0.0.1/32"], in: scratch.path)
        #expect(result.status == 1)
        #expect(result.stdout.contains("3 URLs in 1 list: 1 downloaded"), "\(result.stdout)")
        #expect(result.stderr.contains("169.254.169.254/latest/meta-data/iam.png: policy_denied"), "\(result.stderr)")
        #expect(result.stderr.contains("/img/loop.png: policy_denied"))
        #expect(server.requestCount("/img/loop.png") == 0)
        #expect(server.requestCount("/img/allowed.png") == 1)
        try await server.shutdown()
    }

    @Test(
        "bad usage exits 2 with a message",
        arguments: [
            ["prefetch"],
            ["prefetch", "l.txt", "--max-parallel", "0"],
            ["prefetch", "l.txt", "--max-per-host", "abc"],
            ["prefetch", "l.txt", "--no-such-flag"],
            ["prefetch", "l.txt", "--deny", "300.1.1.1/8"],
            ["no-such-command"],
        ])
    func badUsage(arguments: [String]) async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let result = try await BinaryRunner.imgd(arguments, in: scratch.path)
        #expect(result.status == 2)
        #expect(result.stderr.contains("Error:") || result.stderr.contains("Usage:"))
    }

    @Test(
        "a value imgd run refuses (a daemon minimum, a bad duration) imgd prefetch refuses with the same message; --timeout 1.5s is taken",
        arguments: [["--disk-limit", "100KB"], ["--max-age", "30s"], ["--timeout", "0.5s"], ["--max-body-bytes", "100"]])
    func refusesAsRunDoes(arguments: [String]) async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try scratch.write("l.txt", "")
        let prefetch = try await BinaryRunner.imgd(["prefetch", "l.txt", "--cache", "c"] + arguments, in: scratch.path)
        let run = try await BinaryRunner.imgd(["run"] + arguments, in: scratch.path)
        #expect(prefetch.status == 2 && run.status == 2, "prefetch: \(prefetch.stderr)\nrun: \(run.stderr)")
        // The message, then the usage, each on a line of its own.
        let lines = prefetch.stderr.split(separator: "\n")
        try #require(lines.count >= 2 && lines[0].hasPrefix("Error: ") && lines[1].hasPrefix("Usage: imgd prefetch"), "\(prefetch.stderr)")
        let message = String(lines[0].dropFirst("Error: ".count))
        #expect(message.hasPrefix(arguments[0] + ": "), "\(message)")
        #expect(run.stderr.contains(message), "run: \(run.stderr)\nprefetch: \(message)")

        let taken = try await BinaryRunner.imgd(["prefetch", "l.txt", "--cache", "c", "--timeout", "1.5s"], in: scratch.path)
        #expect(taken.status == 0, "\(taken.stderr)")
    }

    @Test("--help and --version exit 0")
    func helpAndVersion() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let help = try await BinaryRunner.imgd(["prefetch", "--help"], in: scratch.path)
        #expect(help.status == 0)
        #expect(help.stdout.contains("--max-per-host"))
        #expect(help.stdout.contains("--timeout <timeout>") && !help.stdout.contains("--memory-limit"), "\(help.stdout)")
        let version = try await BinaryRunner.imgd(["--version"], in: scratch.path)
        #expect(version.status == 0)
        #expect(version.stdout.contains(ImgdVersion.string))
    }
}
