import Foundation
import ImgdTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The upkeep's flags through the real daemon: `--sweep-interval` (the age sweep runs again and
/// again while the daemon runs, not only at start) and `--pressure-threshold` (the `avg10`
/// percentage that counts as memory pressure when the kernel refuses a PSI trigger).
@Suite("imgd: --sweep-interval and --pressure-threshold (the real binary)", .timeLimit(.minutes(10)), .offThePool)
struct DaemonUpkeepFlagTests {
    @Test("--sweep-interval 1s: entries that grow older than max-age while imgd runs are swept, one evicted event (reason age) each, counted as expired; the rest stay")
    func sweepInterval() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try await withRunningServer { server in
            // Filled before the daemon starts, so it holds no access time of its own to write
            // over the ages set below.
            let targets = ["/img/age-a.png", "/img/age-b.png", "/img/age-c.png"]
            try scratch.write("list.txt", targets.map(server.url).joined(separator: "\n") + "\n")
            let filled = try await BinaryRunner.imgd(["prefetch", "list.txt", "--cache", "imgd-data/cache"], in: scratch.path)
            try #require(filled.status == 0, "\(filled.stdout)\(filled.stderr)")

            let daemon = try await DaemonProcess.start(in: scratch.path, arguments: ["--max-age", "1h", "--sweep-interval", "1s"])
            defer { if daemon.isRunning { kill(daemon.pid, SIGKILL) } }
            let events = try await daemon.subscribe(["evicted"])
            defer { events.close() }
            #expect((try await daemon.result(#"{"cmd":"status"}"#)["cache"] as? [String: Any])?["entries"] as? Int == 3)

            // Each entry in turn is made two hours idle (its last use moved back in the index):
            // only a sweep after the start can remove it, and with the default interval (10
            // minutes) none would come within the wait.
            for (index, target) in targets.prefix(2).enumerated() {
                try await Self.ageEntry(server.url(target), in: scratch.path + "/imgd-data/cache/index.sqlite")
                let swept = await eventually(timeout: .seconds(20)) {
                    events.events.filter { $0.data["reason"] as? String == "age" }.count == index + 1
                }
                #expect(swept, "no age sweep removed \(target); events: \(events.events.map(\.line)); log:\n\(daemon.log)")
                let miss = try await daemon.call(#"{"cmd":"get","url":"\#(server.url(target))","fetch":false}"#)
                #expect((miss["error"] as? [String: Any])?["code"] as? String == "not_found", "\(target) is still cached: \(miss)")
            }
            let ages = events.events.filter { $0.data["reason"] as? String == "age" }
            #expect(ages.map { $0.data["count"] as? Int } == [1, 1], "\(events.events.map(\.line))")
            let stats = try await daemon.result(#"{"cmd":"stats"}"#)
            #expect((stats["disk"] as? [String: Any])?["expired"] as? Int == 2, "\(stats)")
            #expect((try await daemon.result(#"{"cmd":"status"}"#)["cache"] as? [String: Any])?["entries"] as? Int == 1)
            #expect(daemon.log.contains("removed 1 entries"), "log:\n\(daemon.log)")
            #expect(await daemon.stop() == 0, "log:\n\(daemon.log)")
        }
    }

    @Test("--pressure-threshold 25 while polling avg10: 30% is pressure, 20% (above the default 10) is not, so 30 again is a second event (origin avg10)",
          .enabled(if: DaemonPressureAndSpaceTests.canUnshareMounts, "needs root, unshare and /proc/pressure/memory"))
    func pressureThreshold() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        // A PSI file of the test's own, bind-mounted read-only (the trigger is refused with
        // EROFS, so the daemon polls) over every file the daemon may pick, in a mount namespace
        // of the daemon's own.
        let fake = scratch.path + "/memory.pressure"
        try Self.writePressure(avg10: "30.00", to: fake)
        let watch = try FileAccessWatch(fake)
        let script = """
            mount --bind -o ro "$IMGD_TEST_PSI" /proc/pressure/memory || exit 97
            cgroup=$(sed -n 's/^0:://p' /proc/self/cgroup)
            own="/sys/fs/cgroup${cgroup%/}/memory.pressure"
            if [ -f "$own" ]; then mount --bind -o ro "$IMGD_TEST_PSI" "$own" || exit 98; fi
            exec "$0" "$@"
            """
        let daemon = try await DaemonProcess.start(
            in: scratch.path, arguments: ["--pressure-threshold", "25"], environment: ["IMGD_TEST_PSI": fake],
            launcher: ["/usr/bin/unshare", "--mount", "--propagation", "private", "/bin/sh", "-c", script])
        defer { if daemon.isRunning { kill(daemon.pid, SIGKILL) } }
        #expect(await eventually { daemon.log.contains("(pressure above 25.0%)") }, "log:\n\(daemon.log)")
        let memory = try await daemon.result(#"{"cmd":"status"}"#)["memory"] as? [String: Any] ?? [:]
        #expect(memory["pressure_source"] as? String == "psi-poll", "\(memory); log:\n\(daemon.log)")

        // 30% at start: the first reading is pressure.
        let first = await eventually(timeout: .seconds(20)) {
            try await daemon.result(#"{"cmd":"status"}"#)["pressure_events"] as? Int == 1
        }
        #expect(first, "30% above a threshold of 25 was not an event; log:\n\(daemon.log)")
        let events = try await daemon.subscribe(["memory_pressure"])
        defer { events.close() }

        // 20%: below 25 (but above the default 10), read at least once: no event.
        try Self.writePressure(avg10: "20.00", to: fake)
        #expect(await eventually(timeout: .seconds(20)) { watch.wasReadSinceLastWrite }, "20% was never read: \(watch.accesses)")
        #expect(try await daemon.result(#"{"cmd":"status"}"#)["pressure_events"] as? Int == 1, "20% counted as pressure")

        // 30% again: above the threshold after being below it, a second event.
        try Self.writePressure(avg10: "30.00", to: fake)
        let second = await events.first("memory_pressure", timeout: .seconds(20))
        #expect(second?.data["origin"] as? String == "avg10", "\(events.events.map(\.line)); log:\n\(daemon.log)")
        #expect(second?.data["count"] as? Int == 2, "\(events.events.map(\.line))")
        #expect(try await daemon.result(#"{"cmd":"status"}"#)["pressure_events"] as? Int == 2)
        #expect(await daemon.stop() == 0, "log:\n\(daemon.log)")
    }

    // MARK: - Support

    /// Moves the last use of `url`'s entry two hours back, in the running daemon's index (WAL:
    /// the daemon reads and writes on meanwhile).
    static func ageEntry(_ url: String, in index: String) async throws {
        let update = "UPDATE entries SET last_access = last_access - 7200000 WHERE url = '\(url)'; SELECT changes();"
        let run = try await ChildProcess.run("/usr/bin/sqlite3", ["-cmd", ".timeout 10000", index, update], timeout: .seconds(30))
        try #require(run.status == 0 && run.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "1", "\(url): \(run.stdout)\(run.stderr)")
    }

    /// Writes a PSI file's text with the `some` line's `avg10` in place (the inode is bind-mounted).
    static func writePressure(avg10: String, to path: String) throws {
        let text = "some avg10=\(avg10) avg60=0.00 avg300=0.00 total=0\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        defer { close(fd) }
        let bytes = Array(text.utf8)
        guard bytes.withUnsafeBytes({ write(fd, $0.baseAddress, $0.count) }) == bytes.count else {
            throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
        }
    }
}
