import Foundation
import ImgdTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Every `imgctl` subcommand once against the real daemon, in human form: what it prints from
/// the replies the daemon really sends, and its exit status.
@Suite("imgctl's subcommands against the real daemon", .timeLimit(.minutes(10)), .offThePool)
struct ImgctlSubcommandTests {
    @Test("status, stats (and --prometheus), add, get, warm, lists, failed, retry, cancel, evict, purge, fsck and watch")
    func everySubcommand() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let server = try await TestHTTPServer.start()
        let daemon = try await RecordedReplyTests.startDaemon(in: scratch)
        let watchLog = scratch.path + "/watch.log"
        let watch = try ChildProcess(
            BinaryRunner.imgctlPath, ["watch", "--socket", daemon.socket, "--events", "fetched,failed,evicted"],
            in: scratch.path, environment: BinaryRunner.imgctlEnvironment, stdout: .file(watchLog), stderr: .file(watchLog))
        do {
            try await Self.exercise(daemon: daemon, server: server, scratch: scratch, watch: watch, watchLog: watchLog)
        } catch {
            Issue.record(error)
        }
        #expect(await daemon.stop() == 0, "log:\n\(daemon.log)")
        // The daemon stopped: watch says the connection is gone and exits 3.
        #expect(await watch.exited(within: .seconds(30)) == 3, "watch: \(Self.text(watchLog))")
        if daemon.isRunning { kill(daemon.pid, SIGKILL) }
        try await server.shutdown()
    }

    static func text(_ path: String) -> String {
        (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
    }

    static func exercise(
        daemon: DaemonProcess, server: TestHTTPServer, scratch: ScratchFolder, watch: ChildProcess, watchLog: String
    ) async throws {
        let socket = daemon.socket
        func imgctl(_ arguments: [String]) async throws -> ChildProcess.Output {
            try await BinaryRunner.imgctl(arguments + ["--socket", socket], in: scratch.path)
        }

        // watch: subscribed once a fetch shows up in its output (each probe a new URL, added:
        // `get` answers in its reply, not by event).
        var probe = 0
        let watching = await eventually(timeout: .seconds(30), interval: .milliseconds(200)) {
            probe += 1
            _ = try await daemon.call(#"{"cmd":"add","urls":["\#(server.url("/img/probe\(probe).png"))"]}"#)
            return await eventually(timeout: .seconds(1)) { text(watchLog).contains(" fetched ") }
        }
        #expect(watching, "watch printed no fetched event: \(text(watchLog))")
        let fetchedLine = text(watchLog).split(separator: "\n").first { $0.contains(" fetched ") }.map(String.init) ?? ""
        #expect(fetchedLine.contains("format=png") && fetchedLine.contains("url=" + server.url("/img/probe")), "\(fetchedLine)")

        let status = try await imgctl(["status"])
        #expect(status.status == 0, "\(status.stderr)")
        #expect(status.stdout.hasPrefix("imgd "), "\(status.stdout)")
        #expect(status.stdout.contains("memory pressure: systemd (\(scratch.path)/pressure.fifo)"), "\(status.stdout)")
        #expect(status.stdout.contains("spool: \(daemon.spool)"), "\(status.stdout)")

        let added = server.url("/img/added.png")
        let add = try await imgctl(["add", added, "not a url"])
        #expect(add.status == 1, "a rejected URL is exit 1: \(add.stderr)")
        #expect(add.stdout == "queued 1 URL\n", "\(add.stdout)")
        #expect(add.stderr.hasPrefix("imgctl: rejected: not a url: bad_url: "), "\(add.stderr)")
        #expect(await eventually(timeout: .seconds(10)) { try await daemon.call(#"{"cmd":"get","url":"\#(added)","fetch":false}"#)["ok"] as? Bool == true })

        let got = try await imgctl(["get", server.url("/img/got.png")])
        #expect(got.status == 0, "\(got.stderr)")
        let path = got.stdout.trimmingCharacters(in: .newlines)
        #expect(FileManager.default.contents(atPath: path).map([UInt8].init) == TestHTTPServer.body(for: "/img/got.png"))

        // A list with a good URL and a 404: warm --wait reports it failed, exit 1.
        let missing = server.url("/status/404")
        try scratch.write("links.txt", server.url("/img/listed.png") + "\n" + missing + "\n")
        let warm = try await imgctl(["warm", "--wait", scratch.path + "/links.txt"])
        #expect(warm.status == 1, "exit status \(warm.status): \(warm.stdout)\(warm.stderr)")
        #expect(warm.stdout.contains("links.txt: failed: 2 URLs: 1 cached, 0 already cached, 1 failed"), "\(warm.stdout)")
        #expect(warm.stderr.contains("imgctl: links.txt:2: \(missing): http_404: "), "\(warm.stderr)")

        // lists: claimed_at is the daemon's epoch milliseconds, shown as an age.
        let lists = try await imgctl(["lists"])
        #expect(lists.status == 0, "\(lists.stderr)")
        let row = lists.stdout.split(separator: "\n").first { $0.hasPrefix("links.txt ") }.map(String.init) ?? ""
        #expect(row.contains(" failed ") && row.hasSuffix(" ago"), "\(lists.stdout)")
        #expect(row.split(separator: " ", omittingEmptySubsequences: true).prefix(7) == ["links.txt", "failed", "2", "1", "0", "1", "0"], "\(row)")

        let failedList = try await imgctl(["failed", "--list", "links.txt"])
        #expect(failedList.status == 0, "\(failedList.stderr)")
        #expect(failedList.stdout.contains("http_404  links.txt:2  \(missing)"), "\(failedList.stdout)")
        let failed = try await imgctl(["failed"])
        #expect(failed.status == 0, "\(failed.stderr)")
        let remembered = failed.stdout.split(separator: "\n").map { $0.split(separator: " ").map(String.init) }
        #expect(remembered.contains { $0.prefix(3) == ["http_404", "-", missing] }, "\(failed.stdout)")

        let retryURL = try await imgctl(["retry", missing])
        #expect(retryURL.stdout == "requeued 1 URL\n", "\(retryURL.stdout)\(retryURL.stderr)")
        // The retry's own failed line, the second: the list's was there before it. Until it
        // is, the retried fetch may still be running, and `retry --list` would join it.
        let failedLines = { text(watchLog).split(separator: "\n").filter { $0.contains(" failed code=http_404 ") }.count }
        #expect(await eventually { failedLines() == 2 }, "\(text(watchLog))")
        #expect(server.requestCount("/status/404") == 2)
        #expect(await eventually(timeout: .seconds(10)) { (try await daemon.list("links.txt"))?["state"] as? String == "failed" })
        let retryList = try await imgctl(["retry", "--list", "links.txt"])
        #expect(retryList.status == 0 && retryList.stdout == "requeued 1 URL\n", "\(retryList.stdout)\(retryList.stderr)")
        // Three 404s, asked for by a list, by `retry URL` and by `retry --list`: each is a
        // failed event and a failure counted by its code, whoever asked.
        #expect(await eventually { server.requestCount("/status/404") == 3 })
        #expect(await eventually { failedLines() == 3 }, "\(text(watchLog))")
        #expect(await eventually(timeout: .seconds(10)) { (try await daemon.list("links.txt"))?["state"] as? String == "failed" })
        let counted = try await daemon.result(#"{"cmd":"stats"}"#)
        #expect((counted["failures"] as? [String: Any])?["http_404"] as? Int == 3, "\(counted)")

        // cancel: a URL the server holds, then a list whose URL it holds.
        let held = server.url("/img/held.png?gate=held")
        _ = try await daemon.result(#"{"cmd":"get","url":"\#(held)","wait":false}"#)
        #expect(await eventually { server.requestCount("/img/held.png?gate=held") == 1 })
        let cancelURL = try await imgctl(["cancel", held])
        #expect(cancelURL.status == 0 && cancelURL.stdout == "cancelled 1 download\n", "\(cancelURL.stdout)\(cancelURL.stderr)")
        try daemon.drop("slow.txt", server.url("/img/slow.png?gate=slow") + "\n")
        #expect(await eventually { server.requestCount("/img/slow.png?gate=slow") == 1 })
        let cancelList = try await imgctl(["cancel", "--list", "slow.txt"])
        #expect(cancelList.status == 0 && cancelList.stdout == "cancelled 1 download\n", "\(cancelList.stdout)\(cancelList.stderr)")
        server.openGate("held")
        server.openGate("slow")
        #expect(await daemon.finishedList("slow.txt")?["state"] as? String == "cancelled")

        let evict = try await imgctl(["evict", server.url("/img/got.png")])
        #expect(evict.status == 0 && evict.stdout == "evicted 1 entry\n", "\(evict.stdout)\(evict.stderr)")
        #expect(
            await eventually {
                text(watchLog).split(separator: "\n").contains { $0.contains(" evicted ") && $0.contains(" count=1 ") && $0.hasSuffix(" reason=command") }
            }, "\(text(watchLog))")
        let purgeMemory = try await imgctl(["purge", "--memory"])
        #expect(purgeMemory.status == 0 && purgeMemory.stdout.hasPrefix("purged ") && purgeMemory.stdout.hasSuffix(" from memory\n"), "\(purgeMemory.stdout)\(purgeMemory.stderr)")
        let fsck = try await imgctl(["fsck"])
        #expect(fsck.status == 0, "\(fsck.stdout)\(fsck.stderr)")
        #expect(fsck.stdout.hasPrefix("checked ") && fsck.stdout.hasSuffix(" entries: 0 bad, 0 removed\n"), "\(fsck.stdout)")
        let purgeDisk = try await imgctl(["purge", "--disk"])
        #expect(purgeDisk.status == 0 && purgeDisk.stdout.hasPrefix("evicted ") && purgeDisk.stdout.hasSuffix(" from disk\n"), "\(purgeDisk.stdout)\(purgeDisk.stderr)")

        // stats: the counters the daemon sends, in words and for Prometheus.
        let stats = try await imgctl(["stats"])
        #expect(stats.status == 0, "\(stats.stderr)")
        for line in ["download failures: ", "retries: ", "coalesced: ", "failures: ", "memory hits: ", "disk evicted: ", "gets: "] {
            #expect(stats.stdout.contains("\n" + line) || stats.stdout.hasPrefix(line), "no \(line) in \(stats.stdout)")
        }
        #expect(stats.stdout.contains("http_404 "), "\(stats.stdout)")
        let prometheus = try await imgctl(["stats", "--prometheus"])
        #expect(prometheus.status == 0, "\(prometheus.stderr)")
        for family in ["imgd_download_failures_total", "imgd_retries_total", "imgd_coalesced_total", "imgd_gets_total", "imgd_disk_evicted_total"] {
            #expect(prometheus.stdout.contains("# TYPE \(family) counter\n"), "no \(family) in \(prometheus.stdout)")
        }
        #expect(prometheus.stdout.contains(#"imgd_failures_total{code="http_404"} "#), "\(prometheus.stdout)")
        #expect(!prometheus.stdout.contains("(from stats)"), "a counter without its own HELP text: \(prometheus.stdout)")
    }
}
