import Foundation
import ImgdTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// What the real daemon says about its memory-pressure source and its disk: `status.memory`'s
/// `pressure_source` and `pressure_path` and the start line for each source (after any
/// fallback), evictions made at admission as counted in `stats` and published as events, and a
/// `disk-limit` its filesystem cannot honour.
@Suite("imgd: pressure source, evictions and disk space (the real binary)", .timeLimit(.minutes(10)), .offThePool)
struct DaemonPressureAndSpaceTests {
    // MARK: - Memory pressure source

    @Test("status.memory names the source in use: systemd (a FIFO in MEMORY_PRESSURE_WATCH), off (/dev/null); the log line matches")
    func systemdAndOff() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let fifo = scratch.path + "/memory.pressure"
        #expect(mkfifo(fifo, 0o600) == 0)

        let watched = try await DaemonProcess.start(in: scratch.path, environment: ["MEMORY_PRESSURE_WATCH": fifo])
        defer { if watched.isRunning { kill(watched.pid, SIGKILL) } }
        let memory = try await Self.memory(of: watched)
        #expect(memory["pressure_source"] as? String == "systemd", "\(memory)")
        #expect(memory["pressure_path"] as? String == fifo, "\(memory)")
        #expect(
            await eventually { watched.log.contains("imgd: memory pressure: watching \(fifo) (FIFO from MEMORY_PRESSURE_WATCH)\n") },
            "log:\n\(watched.log)")
        #expect(await watched.stop() == 0)

        let off = try await DaemonProcess.start(in: scratch.path, environment: ["MEMORY_PRESSURE_WATCH": "/dev/null"])
        defer { if off.isRunning { kill(off.pid, SIGKILL) } }
        let none = try await Self.memory(of: off)
        #expect(none["pressure_source"] as? String == "off", "\(none)")
        #expect(none["pressure_path"] is NSNull, "\(none)")
        #expect(
            await eventually { off.log.contains("imgd: memory pressure: disabled (MEMORY_PRESSURE_WATCH is /dev/null)\n") },
            "log:\n\(off.log)")
        #expect(await off.stop() == 0)
    }

    @Test("without systemd, on a kernel with PSI: a trigger on the PSI file (or polling, if refused), status and log agreeing",
          .enabled(if: FileManager.default.fileExists(atPath: "/proc/pressure/memory")))
    func psiTrigger() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let daemon = try await DaemonProcess.start(in: scratch.path)
        defer { if daemon.isRunning { kill(daemon.pid, SIGKILL) } }
        let memory = try await Self.memory(of: daemon)
        // This process's own cgroup file when it has one, else the system-wide one. Root (as on
        // the machines these tests run on) may write a trigger with the default 2 s window to
        // either; a sandbox that forbids it gets polling, and then both must say so.
        let path = try #require(memory["pressure_path"] as? String, "\(memory)")
        #expect(path == "/proc/pressure/memory" || path.hasSuffix("/memory.pressure"), "\(memory)")
        let line = switch memory["pressure_source"] as? String {
        case "psi-trigger": "imgd: memory pressure: watching \(path) (trigger some 200000 2000000)\n"
        case "psi-poll": "imgd: memory pressure: reading avg10 of \(path) every 5s (pressure above 10.0%); the kernel refused the trigger"
        default: "a psi-trigger or psi-poll source, not \(memory)"
        }
        #expect(await eventually { daemon.log.contains(line) }, "no line \(line) in the log:\n\(daemon.log)")
        if getuid() == 0, access(path, W_OK) == 0 {
            #expect(memory["pressure_source"] as? String == "psi-trigger", "root may write \(path): \(memory)")
        }
        #expect(await daemon.stop() == 0)
    }

    @Test("a PSI file imgd cannot write (read-only, as under ProtectControlGroups=): psi-poll in status; the log says polling, at --pressure-threshold, and why",
          .enabled(if: Self.canUnshareMounts))
    func psiPollingFallback() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        // In a mount namespace of its own, the PSI files imgd may pick are bind-mounted read-only:
        // opening one to write a trigger fails with EROFS, which is a refusal, not an error.
        let script = """
            mount --bind -o ro /proc/pressure/memory /proc/pressure/memory || exit 97
            if [ -d /sys/fs/cgroup ]; then mount --bind -o ro /sys/fs/cgroup /sys/fs/cgroup || exit 98; fi
            exec "$0" "$@"
            """
        let daemon = try await DaemonProcess.start(
            in: scratch.path, arguments: ["--pressure-threshold", "25"],
            launcher: ["/usr/bin/unshare", "--mount", "--propagation", "private", "/bin/sh", "-c", script])
        defer { if daemon.isRunning { kill(daemon.pid, SIGKILL) } }
        let memory = try await Self.memory(of: daemon)
        #expect(memory["pressure_source"] as? String == "psi-poll", "\(memory); log:\n\(daemon.log)")
        let path = try #require(memory["pressure_path"] as? String, "\(memory)")
        #expect(path == "/proc/pressure/memory" || path.hasSuffix("/memory.pressure"), "\(memory)")
        let line = "imgd: memory pressure: reading avg10 of \(path) every 5s (pressure above 25.0%); "
            + "the kernel refused the trigger some 200000 2000000: Read-only file system\n"
        #expect(await eventually { daemon.log.contains(line) }, "no line \(line) in the log:\n\(daemon.log)")
        #expect(!daemon.log.contains("(trigger some"), "the log claims a trigger is watched:\n\(daemon.log)")
        #expect(await daemon.stop() == 0)
    }

    // MARK: - Evictions at admission

    @Test("a full cache: evictions made to admit new bodies are counted in stats.disk.evicted and published as evicted events (reason size)")
    func admissionEvictions() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let server = try await TestHTTPServer.start()
        do {
            // Room for three 300 KB images (1 MiB is the smallest cap): the fourth and later ones
            // each evict to get in.
            let daemon = try await DaemonProcess.start(in: scratch.path, arguments: ["--disk-limit", "1MiB"])
            defer { if daemon.isRunning { kill(daemon.pid, SIGKILL) } }
            let events = try await daemon.subscribe(["evicted"])
            defer { events.close() }
            for index in 0..<7 {
                let got = try await daemon.result(#"{"cmd":"get","url":"\#(server.url("/img/full\(index).png?bytes=300000"))"}"#)
                #expect(got["path"] is String, "\(got)")
            }
            let stats = try await daemon.result(#"{"cmd":"stats"}"#)
            let disk = stats["disk"] as? [String: Any] ?? [:]
            let evicted = disk["evicted"] as? Int ?? 0
            #expect(evicted >= 4, "7 images of 300 KB under a 1 MiB cap, but stats.disk.evicted is \(evicted): \(stats)")
            #expect(disk["expired"] as? Int == 0, "\(stats)")
            // One event per eviction pass: their counts add up to what stats counted.
            let counted = { events.events.reduce(0) { $0 + ($1.data["count"] as? Int ?? 0) } }
            #expect(await eventually(timeout: .seconds(10)) { counted() == evicted }, "events: \(events.events.map(\.line))")
            #expect(events.events.allSatisfy { $0.data["reason"] as? String == "size" }, "\(events.events.map(\.line))")
            #expect(events.events.allSatisfy { ($0.data["bytes"] as? Int ?? 0) > 250_000 }, "\(events.events.map(\.line))")

            // The evict command goes through the same ledger: counted once, one event.
            let last = server.url("/img/full6.png?bytes=300000")
            #expect(try await daemon.result(#"{"cmd":"evict","urls":["\#(last)"]}"#)["evicted"] as? Int == 1)
            let byCommand = await events.first("evicted") { $0["reason"] as? String == "command" }
            #expect(byCommand?.data["count"] as? Int == 1, "\(events.events.map(\.line))")
            let after = try await daemon.result(#"{"cmd":"stats"}"#)["disk"] as? [String: Any] ?? [:]
            #expect(after["evicted"] as? Int == evicted + 1, "\(after)")
            #expect(await daemon.stop() == 0, "log:\n\(daemon.log)")
            try await server.shutdown()
        } catch {
            try? await server.shutdown()
            throw error
        }
    }

    // MARK: - Disk space

    @Test("disk-limit above what the filesystem can give: a warning at start and status.degraded; a reload to a limit that fits clears it",
          .enabled(if: TmpfsMount.isAvailable))
    func diskLimitOverFreeSpace() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let tmpfs = try TmpfsMount(bytes: 8 << 20)
        defer { tmpfs.unmount() }
        let config = scratch.path + "/imgd.toml"
        try scratch.write("imgd.toml", "disk-limit = \"64MiB\"\n")
        let daemon = try await DaemonProcess.start(
            in: scratch.path, arguments: ["--config", config, "--cache", tmpfs.path + "/cache"])
        defer { if daemon.isRunning { kill(daemon.pid, SIGKILL) } }
        #expect(
            daemon.log.contains("imgd: warning: degraded: disk-limit 64 MiB is more than the filesystem of \(tmpfs.path)/cache can give the cache"),
            "log:\n\(daemon.log)")
        let status = try await daemon.result(#"{"cmd":"status"}"#)
        let degraded = status["degraded"] as? [[String: Any]] ?? []
        #expect(degraded.map { $0["code"] as? String } == ["disk_limit_over_free_space"], "\(status)")
        #expect((degraded.first?["message"] as? String)?.contains("lower disk-limit or free space") == true, "\(degraded)")

        // A limit that fits, applied by a reload: no longer degraded.
        try scratch.write("imgd.toml", "disk-limit = \"2MiB\"\n")
        kill(daemon.pid, SIGHUP)
        #expect(await eventually(timeout: .seconds(10)) { daemon.log.contains("recovered: disk_limit_over_free_space cleared") },
                "log:\n\(daemon.log)")
        let after = try await daemon.result(#"{"cmd":"status"}"#)
        #expect((after["degraded"] as? [Any])?.isEmpty == true, "\(after)")
        #expect(await daemon.stop() == 0)
    }

    // MARK: - Support

    /// `status.memory`.
    private static func memory(of daemon: DaemonProcess) async throws -> [String: Any] {
        // The source is opened by the watch's own task, which may run a moment after the socket
        // answers (until then status shows the source asked for); it is logged once opened.
        #expect(await eventually(timeout: .seconds(30)) { daemon.log.contains("imgd: memory pressure: ") }, "log:\n\(daemon.log)")
        return try await daemon.result(#"{"cmd":"status"}"#)["memory"] as? [String: Any] ?? [:]
    }

    /// Root with `unshare`, and a PSI file to make read-only.
    static let canUnshareMounts = getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/unshare")
        && FileManager.default.fileExists(atPath: "/proc/pressure/memory")
}
