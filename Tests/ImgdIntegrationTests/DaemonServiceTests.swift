import Foundation
import ImgdCore
import ImgdTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The real `imgd` daemon as a service: what it tells systemd (`READY=1`, `STATUS=`, the
/// watchdog, reloads, stopping), socket activation, its folders and socket file, its
/// configuration file and reloads, memory pressure, the control protocol's error paths, and
/// `imgctl` against it. Each test runs its own daemon in its own scratch folder.
@Suite("imgd as a service (the real binaries)", .timeLimit(.minutes(10)), .offThePool)
struct DaemonServiceTests {
    // MARK: - 1. systemd notifications

    @Test("NOTIFY_SOCKET: READY=1 with STATUS= once the socket answers, the watchdog, warming status, reload, stop")
    func notifications() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let notify = try NotifySocket(in: scratch.path)
        defer { notify.close() }
        try await withRunningServer { server in
            // sd_watchdog_enabled() honours WATCHDOG_USEC only when WATCHDOG_PID is our pid: a
            // shell sets it to its own pid, then becomes imgd (exec keeps the pid).
            let daemon = try await DaemonProcess.start(
                in: scratch.path, environment: ["NOTIFY_SOCKET": notify.path, "WATCHDOG_USEC": "400000"],
                waitForSocket: false, launcher: ["/bin/sh", "-c", #"export WATCHDOG_PID=$$; exec "$0" "$@""#])
            defer { daemon.killIfRunning() }
            let socket = scratch.path + "/imgd-data/imgd.sock"

            let ready = try #require(
                await notify.waitForMessage(withLine: "READY=1", timeout: .seconds(30)), "no READY=1; log:\n\(daemon.log)")
            let readyAt = ContinuousClock.now
            let readyLines = notify.messages[ready].split(separator: "\n")
            #expect(readyLines.contains { $0.hasPrefix("STATUS=") }, "READY=1 came without STATUS=: \(notify.messages[ready])")
            // READY=1 means the socket answers: no retrying here.
            let pong = try await request(socket, #"{"cmd":"ping"}"#)
            #expect((pong["result"] as? [String: Any])?["pong"] as? Bool == true, "\(pong)")
            // Nothing before READY=1 claims the daemon is ready or stopping.
            #expect(!notify.messages[..<ready].contains { $0.contains("READY=1") || $0.contains("STOPPING=1") })

            // WATCHDOG_USEC=400000: a ping every 200 ms; at least 3 within 2 s of READY=1.
            let watchdogs = await notify.wait(timeout: .seconds(2) - (ContinuousClock.now - readyAt)) {
                $0[ready...].filter { $0.split(separator: "\n").contains("WATCHDOG=1") }.count >= 3
            }
            let pinged = notify.messages[ready...].filter { $0.split(separator: "\n").contains("WATCHDOG=1") }.count
            #expect(watchdogs, "\(pinged) WATCHDOG=1 messages within 2 s of READY=1; messages: \(notify.messages)")

            // A list held by the server: STATUS= says it is warming.
            let spool = try #require(try await result(socket, #"{"cmd":"status"}"#)["spool"] as? String)
            let held = server.url("/img/held.png?gate=warm")
            try dropList(named: "warm.txt", lines: [held], into: spool)
            let beforeWarming = notify.messages.count
            let warming = await notify.wait(timeout: .seconds(10)) { messages in
                messages.count > beforeWarming && messages[beforeWarming...].contains { $0.contains("STATUS=warming 0/1 in 1 list;") }
            }
            #expect(warming, "no STATUS=warming 0/1 in 1 list; statuses: \(Self.statuses(notify.messages[beforeWarming...]))")
            server.openGate("warm")
            let beforeIdle = notify.messages.count
            let idle = await notify.wait(timeout: .seconds(10)) { messages in
                messages.count > beforeIdle && messages[beforeIdle...].contains { $0.contains("STATUS=idle;") }
            }
            #expect(idle, "no STATUS=idle after the list finished; statuses: \(Self.statuses(notify.messages[beforeIdle...]))")

            // SIGHUP: RELOADING=1, then READY=1 again.
            let beforeReload = notify.messages.count
            daemon.signal(SIGHUP)
            let reloading = await notify.waitForMessage(withLine: "RELOADING=1", after: beforeReload)
            #expect(reloading != nil, "no RELOADING=1 after SIGHUP; log:\n\(daemon.log)")
            if let reloading {
                #expect(
                    notify.messages[reloading].contains("MONOTONIC_USEC="),
                    "RELOADING=1 without MONOTONIC_USEC=: \(notify.messages[reloading])")
                let readyAgain = await notify.waitForMessage(withLine: "READY=1", after: reloading + 1)
                #expect(readyAgain != nil, "no READY=1 after RELOADING=1; messages: \(notify.messages[reloading...])")
            }

            // SIGTERM: STOPPING=1, exit status 0.
            let beforeStop = notify.messages.count
            daemon.signal(SIGTERM)
            let status = await daemon.waitForExit()
            #expect(status == 0, "exit status \(status); log:\n\(daemon.log)")
            // Sent before the exit, but read by the socket's own thread: waited for, not looked up.
            let stopping = await notify.waitForMessage(withLine: "STOPPING=1", after: beforeStop)
            #expect(stopping != nil, "no STOPPING=1 after SIGTERM; messages: \(notify.messages[beforeStop...])")
        }
    }

    @Test("SIGTERM while a get waits on a held download: the waiting client gets an answer, imgd exits 0 with the transfer cancelled, not waited out")
    func stopWhileWaiting() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try await withRunningServer { server in
            let daemon = try await DaemonProcess.start(in: scratch.path)
            defer { daemon.killIfRunning() }
            let connection = try await KeptConnection(daemon.socket)
            let held = server.url("/img/held.png?gate=never")
            let waiting = Task { try? await connection.callRaw(#"{"id":"w","cmd":"get","url":"\#(held)"}"#) }
            #expect(await server.waitForInFlight(atLeast: 1, timeout: .seconds(10)), "the download did not start")
            kill(daemon.pid, SIGTERM)
            let status = await daemon.waitForExit()
            #expect(status == 0, "log:\n\(daemon.log)")
            // Stopping cancels transfers (Daemon's contract): the held one (its gate never opens)
            // ended by the cancel, not by the stop deadline giving up on it.
            #expect(!daemon.log.contains("did not stop within"), "log:\n\(daemon.log)")
            if let line = await waiting.value {
                let code = ControlReply.errorCode(try KeptConnection.parseReply(line))
                #expect(code == "cancelled" || code == "shutting_down", "\(line)")
            } else {
                Issue.record("the waiting client got no reply, only the connection closed")
            }
        }
    }

    // MARK: - 2. Socket activation

    @Test("systemd-socket-activate: imgd starts on the first connection and serves the passed socket")
    func socketActivation() async throws {
        let activate = "/usr/bin/systemd-socket-activate"
        try #require(FileManager.default.isExecutableFile(atPath: activate), "no \(activate)")
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let path = scratch.path + "/activated.sock"
        let daemon = try await DaemonProcess.start(
            in: scratch.path, arguments: ["--state", "state", "--cache", "cache", "--spool", "spool"],
            waitForSocket: false, launcher: [activate, "-l", path])
        defer { daemon.killIfRunning() }
        // Its "Listening on" line comes after listen(2); the socket file exists from bind(2), a
        // moment earlier, when a connect is still refused.
        let listening = await eventually(timeout: .seconds(10)) { daemon.log.contains("Listening on") || !daemon.isRunning }
        let before = try #require(Self.inode(path), "systemd-socket-activate made no socket; log:\n\(daemon.log)")
        #expect(listening)
        // An unusual mode marks this very file (a replacement could reuse the inode number).
        #expect(chmod(path, Self.markerMode) == 0)
        #expect(!daemon.log.contains("imgd: "), "imgd started before any connection:\n\(daemon.log)")

        // The first connection starts imgd, which answers it.
        let pong = try await request(path, #"{"cmd":"ping"}"#)
        #expect((pong["result"] as? [String: Any])?["pong"] as? Bool == true, "\(pong); log:\n\(daemon.log)")
        let hello = try await result(path, #"{"cmd":"hello"}"#)
        #expect(hello["protocol"] as? Int == 1)

        // It serves the descriptor it was given: the file is the one systemd-socket-activate
        // bound, and imgd made no socket of its own.
        #expect(Self.inode(path) == before && Self.mode(path) == Self.markerMode, "the socket file was replaced or changed")
        #expect(!FileManager.default.fileExists(atPath: scratch.path + "/imgd-data/imgd.sock"), "imgd bound its own socket too")
        let log = daemon.log.split(separator: "\n").filter { $0.hasPrefix("imgd:") }.joined(separator: "\n")
        #expect(log.contains("fd 3"), "imgd's log does not say it serves the passed socket (fd 3):\n\(log)")
        #expect(!log.contains("imgd-data/imgd.sock"), "imgd's log names a socket path it does not listen on:\n\(log)")

        // Stopping leaves the socket file to its owner (systemd).
        daemon.signal(SIGTERM)
        let status = await daemon.waitForExit()
        #expect(status == 0, "exit status \(status); log:\n\(daemon.log)")
        #expect(
            Self.inode(path) == before && Self.mode(path) == Self.markerMode,
            "imgd removed or replaced the socket file it did not create")
    }

    // MARK: - 3. The embedded default

    @Test("no arguments: ./imgd-data/{spool,cache,state} and imgd.sock, named in the log; hello answers")
    func embeddedDefault() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let daemon = try await DaemonProcess.start(in: scratch.path)
        defer { daemon.killIfRunning() }
        let data = scratch.path + "/imgd-data"
        for folder in ["spool", "cache", "state"] {
            var isFolder: ObjCBool = false
            #expect(
                FileManager.default.fileExists(atPath: data + "/" + folder, isDirectory: &isFolder) && isFolder.boolValue,
                "no folder imgd-data/\(folder)")
        }
        #expect(Self.fileType(data + "/imgd.sock") == S_IFSOCK, "imgd-data/imgd.sock is not a socket")
        let log = daemon.log
        for named in [data + "/spool", data + "/cache", data + "/state", "imgd-data/imgd.sock"] {
            #expect(log.contains(named), "the log does not say where \(named) is:\n\(log)")
        }

        let hello = try await daemon.result(#"{"id":"h","cmd":"hello"}"#)
        #expect(hello["protocol"] as? Int == 1)
        #expect(hello["version"] as? String == ImgdVersion.string)
        let features = hello["features"] as? [String] ?? []
        #expect(Set(features).isSuperset(of: ["subscribe", "pin", "data"]), "features: \(features)")

        #expect(await daemon.stop() == 0, "log:\n\(daemon.log)")
        #expect(Self.fileType(data + "/imgd.sock") == nil, "the socket file is left after a clean stop")
    }

    // MARK: - 4. A second imgd

    @Test("a second imgd on the same folders, or on the same socket, exits non-zero saying why; the first keeps working")
    func secondDaemon() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let daemon = try await DaemonProcess.start(in: scratch.path)
        defer { daemon.killIfRunning() }
        let socketInode = Self.inode(daemon.socket)
        #expect(chmod(daemon.socket, Self.markerMode) == 0)

        let same = try await BinaryRunner.imgd([], in: scratch.path, timeout: .seconds(30))
        #expect(same.status != 0, "a second imgd on the same folders started:\n\(same.stderr)")
        // The cache lock, the state folder's or the socket: whichever it meets first, named.
        #expect(
            same.stderr.contains("another imgd") && same.stderr.contains(scratch.path + "/imgd-data"),
            "unclear refusal:\n\(same.stderr)")

        let sameSocket = try await BinaryRunner.imgd(
            ["--spool", "other/spool", "--cache", "other/cache", "--state", "other/state", "--socket", daemon.socket],
            in: scratch.path, timeout: .seconds(30))
        #expect(sameSocket.status != 0, "a second imgd on the same socket started:\n\(sameSocket.stderr)")
        #expect(
            sameSocket.stderr.contains("another imgd is listening on \(daemon.socket)"), "unclear refusal:\n\(sameSocket.stderr)")

        #expect(daemon.isRunning)
        #expect(
            Self.inode(daemon.socket) == socketInode && Self.mode(daemon.socket) == Self.markerMode,
            "the first imgd's socket file was replaced or removed")
        let pong = try await daemon.result(#"{"cmd":"ping"}"#)
        #expect(pong["pong"] as? Bool == true)
        let status = try await daemon.result(#"{"cmd":"status"}"#)
        #expect((status["cache"] as? [String: Any])?["path"] as? String == scratch.path + "/imgd-data/cache")
        #expect(await daemon.stop() == 0, "log:\n\(daemon.log)")
    }

    @Test("a second imgd sharing the state folder and spool (with a cache of its own) refuses without touching the lists")
    func secondDaemonSharingState() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try await withRunningServer { server in
            let daemon = try await DaemonProcess.start(in: scratch.path)
            defer { daemon.killIfRunning() }
            let spool = try #require(try await daemon.result(#"{"cmd":"status"}"#)["spool"] as? String)
            let held = "/img/shared.png?gate=shared"
            try dropList(named: "shared.txt", lines: [server.url(held)], into: spool)
            #expect(await server.waitForInFlight(atLeast: 1, timeout: .seconds(10)), "the list did not start")

            let second = try await DaemonProcess.start(
                in: scratch.path, arguments: ["--cache", "other-cache", "--socket", "other.sock"], waitForSocket: false,
                logName: "second.log")
            defer { second.killIfRunning() }
            // It should exit at once; if it comes up instead, stop it rather than wait it out.
            _ = await eventually(timeout: .seconds(15)) { !second.isRunning || second.log.contains("imgd: ready") }
            let cameUp = second.isRunning
            if cameUp { second.signal(SIGTERM) }
            let status = await second.waitForExit()
            #expect(!cameUp && status != 0, "a second imgd on the same state folder and spool started:\n\(second.log)")
            #expect(second.log.contains("another imgd"), "unclear refusal:\n\(second.log)")
            // Every request for the URL is the first imgd's: its first attempt, and the retries and
            // restarts it counts (under a sanitizer on a loaded machine, the held transfer can
            // outlast the low-speed limit and be tried again). Its counters are read after the
            // server's, so they cover every request the server had seen.
            let requests = server.requestCount(held)
            let stats = try await daemon.result(#"{"cmd":"stats"}"#)
            let firstImgdRequests = 1 + (stats["retries"] as? Int ?? 0) + (stats["preempted"] as? Int ?? 0)
            #expect(requests >= 1 && requests <= firstImgdRequests,
                    "the second imgd fetched the first one's list: \(server.requestLog), first imgd's stats \(stats)")
            #expect(!FileManager.default.fileExists(atPath: scratch.path + "/other.sock"))

            server.openGate("shared")
            let done = await eventually(timeout: .seconds(10), interval: .milliseconds(5)) {
                let lists = (try? await daemon.result(#"{"cmd":"lists"}"#))?["lists"] as? [[String: Any]] ?? []
                return lists.contains { $0["name"] as? String == "shared.txt" && $0["state"] as? String == "done" }
            }
            #expect(done, "the first imgd's list did not finish; log:\n\(daemon.log)")
            #expect(await daemon.stop() == 0, "log:\n\(daemon.log)")
        }
    }

    // MARK: - 5. A stale socket file

    @Test("a stale socket file (bound, then closed) at the path is replaced at start")
    func staleSocket() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try FileManager.default.createDirectory(atPath: scratch.path + "/imgd-data", withIntermediateDirectories: true)
        let path = scratch.path + "/imgd-data/imgd.sock"
        try Self.leaveStaleSocket(at: path)
        #expect(chmod(path, Self.markerMode) == 0)

        let daemon = try await DaemonProcess.start(in: scratch.path)
        defer { daemon.killIfRunning() }
        #expect(Self.fileType(path) == S_IFSOCK)
        // The new socket file has the protocol's mode, not the stale one's (inode numbers are reused).
        #expect(Self.mode(path) == 0o660, "mode \(String(Self.mode(path) ?? 0, radix: 8)): the stale socket file is still there")
        let pong = try await daemon.result(#"{"cmd":"ping"}"#)
        #expect(pong["pong"] as? Bool == true)
        #expect(await daemon.stop() == 0, "log:\n\(daemon.log)")
    }

    // MARK: - 6. The configuration file

    @Test("--config: applied, a flag wins, SIGHUP applies an edit and logs what changed, a path change needs a restart")
    func configurationFile() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let file = scratch.path + "/imgd.toml"
        try scratch.write("imgd.toml", "# imgd\ndisk-limit = \"2MiB\"\nmax-parallel = 2\n")
        try await withRunningServer { server in
            let daemon = try await DaemonProcess.start(in: scratch.path, arguments: ["--config", file])
            defer { daemon.killIfRunning() }
            #expect(try await Self.cacheLimit(daemon) == 2 << 20)

            // max-parallel = 2: four held transfers, two at a time. One fetch first, so libcurl
            // knows the server speaks HTTP/1.1 (see parallelToNewHost).
            _ = try await daemon.result(#"{"cmd":"get","url":"\#(server.url("/img/first.png"))"}"#)
            let urls = (0..<4).map { server.url("/img/p\($0).png?gate=parallel") }
            let added = try await daemon.result(#"{"cmd":"add","urls":\#(Self.jsonArray(urls))}"#)
            #expect(added["accepted"] as? Int == 4)
            #expect(
                await server.waitForInFlight(atLeast: 2, timeout: .seconds(10)),
                "\(server.inFlight) transfers started; requests: \(server.requestLog)")
            let third = await eventually(timeout: .milliseconds(300)) { server.inFlight > 2 }
            #expect(!third, "\(server.inFlight) transfers at once with max-parallel = 2")
            server.openGate("parallel")
            #expect(await server.waitForRequests(atLeast: 5, timeout: .seconds(10)))
            #expect(server.maxInFlight <= 2, "\(server.maxInFlight) transfers at once with max-parallel = 2")

            // SIGHUP after an edit: the new limit applies, the path change waits for a restart.
            let spool = try #require(try await daemon.result(#"{"cmd":"status"}"#)["spool"] as? String)
            try scratch.write("imgd.toml", "disk-limit = \"3MiB\"\nmax-parallel = 2\nspool = \"\(scratch.path)/elsewhere\"\n")
            kill(daemon.pid, SIGHUP)
            let reloaded = await eventually(timeout: .seconds(10)) {
                daemon.log.contains("reloaded: disk-limit = 3") && daemon.log.contains("needs a restart")
            }
            let log = daemon.log
            #expect(reloaded, "the reload was not logged as expected:\n\(log)")
            #expect(log.contains("reloaded: spool changed to \(scratch.path)/elsewhere but needs a restart"), "\(log)")
            #expect(try await Self.cacheLimit(daemon) == 3 << 20)
            let status = try await daemon.result(#"{"cmd":"status"}"#)
            #expect(status["spool"] as? String == spool, "the spool moved without a restart")

            // A reload of a broken file keeps the running configuration.
            try scratch.write("imgd.toml", "disk-limit = \"lots\"\n")
            kill(daemon.pid, SIGHUP)
            let refused = await eventually(timeout: .seconds(10)) { daemon.log.contains("reload failed") }
            #expect(refused, "a broken file on reload was not reported:\n\(daemon.log)")
            #expect(daemon.log.contains("\(file):1"), "the reload error does not name the file and line:\n\(daemon.log)")
            #expect(try await Self.cacheLimit(daemon) == 3 << 20)
            #expect(await daemon.stop() == 0, "log:\n\(daemon.log)")
        }

        // A flag wins over the file, at start and at a reload.
        try scratch.write("imgd.toml", "disk-limit = \"2MiB\"\n")
        let flagged = try await DaemonProcess.start(
            in: scratch.path, arguments: ["--config", file, "--disk-limit", "4MiB"])
        defer { flagged.killIfRunning() }
        #expect(try await Self.cacheLimit(flagged) == 4 << 20)
        try scratch.write("imgd.toml", "disk-limit = \"5MiB\"\n")
        kill(flagged.pid, SIGHUP)
        let reloaded = await eventually(timeout: .seconds(10)) { flagged.log.contains("reloaded:") }
        #expect(reloaded, "no reload logged:\n\(flagged.log)")
        #expect(flagged.log.contains("reloaded: nothing changed"), "\(flagged.log)")
        #expect(try await Self.cacheLimit(flagged) == 4 << 20)
        #expect(await flagged.stop() == 0, "log:\n\(flagged.log)")
    }

    @Test(
        "--config with an unknown key, a bad value or bad syntax: exit 2, naming the file and line",
        arguments: [
            ("disk-limit = \"2MiB\"\ncolour = \"blue\"\n", 2, "unknown setting colour"),
            ("disk-limit = \"2MiB\"\n\nmax-parallel = 0\n", 3, "max-parallel"),
            ("disk-limit = \"2MiB\"\nmemory-limit = \"many\"\n", 2, "memory-limit"),
            ("disk-limit = 2MiB\n", 1, "2MiB"),
            ("disk-limit = \"2MiB\"\nmax-parallel = 01\n", 2, "leading zeros"),
            ("disk-limit = \"2MiB\"\nmax-age = \"\"\"\n12h\n", 4, "not closed"),
            ("max-parallel = 4\n[origin.\"images.example.com\"]\nmax-per-host = 2\n", 2, "unknown table [origin]"),
            ("ca-file = \"/nonexistent/ca.pem\"\n", 1, "ca-file: cannot read /nonexistent/ca.pem"),
            ("max-queued-share = 0\n", 1, "max-queued-share"),
            ("max-queued-share = 101\n", 1, "max-queued-share"),
            ("max-active-lists = 0\n", 1, "max-active-lists"),
        ])
    func badConfigurationFile(text: String, line: Int, mentions: String) async throws {
        try await expectConfigurationRefused(text, line: line, mentions: mentions)
    }

    @Test("--config in any TOML 1.0 form (multi-line and literal strings, 0x integers, comments, arrays over lines) starts and reloads")
    func unusualConfigurationFile() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let file = scratch.path + "/imgd.toml"
        try scratch.write("imgd.toml", #"""
            # imgd's settings — TOML 1.0
            max-parallel = 0x10          # sixteen, in hexadecimal
            disk-limit = """
            3MiB"""
            max-age = '12h'
            deny = [ "10.0.0.0/8",       # added to the defaults
                     "fd00::/8", ]
            pressure-threshold = 2.5e1
            """#)
        let daemon = try await DaemonProcess.start(in: scratch.path, arguments: ["--config", file])
        defer { daemon.killIfRunning() }
        #expect(try await Self.cacheLimit(daemon) == 3 << 20, "log:\n\(daemon.log)")
        // The same settings written plainly: a reload finds nothing changed, so 0x10 was 16, etc.
        try scratch.write("imgd.toml", """
            max-parallel = 16
            disk-limit = "3MiB"
            max-age = "12h"
            deny = ["10.0.0.0/8", "fd00::/8"]
            pressure-threshold = 25
            """)
        kill(daemon.pid, SIGHUP)
        let reloaded = await eventually(timeout: .seconds(10)) { daemon.log.contains("reloaded:") }
        #expect(reloaded, "no reload logged:\n\(daemon.log)")
        #expect(daemon.log.contains("reloaded: nothing changed"), "\(daemon.log)")
        #expect(await daemon.stop() == 0, "log:\n\(daemon.log)")
    }

    @Test("SIGHUP with a changed proxy and deny: logged as needing a restart, and the old values really stay in effect")
    func reloadKeepsRestartSettings() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let file = scratch.path + "/imgd.toml"
        try scratch.write("imgd.toml", "max-per-host = 4\n")
        try await withRunningServer { server in
            let daemon = try await DaemonProcess.start(in: scratch.path, arguments: ["--config", file])
            defer { daemon.killIfRunning() }
            let before = try await daemon.result(#"{"cmd":"get","url":"\#(server.url("/img/before.png"))"}"#)
            #expect(before["path"] is String, "\(before)")

            // Either new value, if applied, would stop the next fetch from the test server (on
            // loopback): a proxy on a closed port, or loopback denied.
            let restartOnly = "proxy = \"http://127.0.0.1:9\"\ndeny = [\"127.0.0.0/8\", \"::1/128\"]\n"
            try scratch.write("imgd.toml", "max-per-host = 2\n" + restartOnly)
            kill(daemon.pid, SIGHUP)
            // The reload's lines are written one by one: wait for the last (in --help order).
            let reloaded = await eventually(timeout: .seconds(10)) {
                daemon.log.contains("reloaded: max-per-host = 2") && daemon.log.contains("reloaded: deny changed")
            }
            let log = daemon.log
            #expect(reloaded, "the reloadable change was not logged as applied:\n\(log)")
            #expect(log.contains("reloaded: proxy changed to http://127.0.0.1:9 but needs a restart; keeping the old value"), "\(log)")
            #expect(log.contains("reloaded: deny changed to 127.0.0.0/8,::1/128 but needs a restart; keeping the old value"), "\(log)")
            let after = try await daemon.result(#"{"cmd":"get","url":"\#(server.url("/img/after.png"))"}"#)
            #expect(after["path"] is String, "a setting logged as kept was applied: \(after)\n\(daemon.log)")
            #expect(await daemon.stop() == 0, "log:\n\(daemon.log)")

            // A restart takes them: the same kind of fetch is now refused (so the check above can fail).
            try scratch.write("imgd.toml", "deny = [\"127.0.0.0/8\", \"::1/128\"]\n")
            let restarted = try await DaemonProcess.start(in: scratch.path, arguments: ["--config", file])
            defer { restarted.killIfRunning() }
            let refused = try await restarted.call(#"{"cmd":"get","url":"\#(server.url("/img/refused.png"))"}"#)
            #expect(ControlReply.errorCode(refused) == "policy_denied", "\(refused)")
            #expect(await restarted.stop() == 0, "log:\n\(restarted.log)")
        }
    }

    // MARK: - 7. Memory pressure

    @Test("MEMORY_PRESSURE_WATCH (a FIFO): a byte written empties the memory tier; purge memory counts; purge disk empties the cache")
    func memoryPressure() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let fifo = scratch.path + "/memory.pressure"
        #expect(mkfifo(fifo, 0o600) == 0)
        try await withRunningServer { server in
            let daemon = try await DaemonProcess.start(in: scratch.path, environment: ["MEMORY_PRESSURE_WATCH": fifo])
            defer { daemon.killIfRunning() }
            for index in 0..<3 {
                let got = try await daemon.result(#"{"cmd":"get","url":"\#(server.url("/img/m\(index).png?w=32&h=32"))"}"#)
                #expect(got["path"] is String)
            }
            let filled = try await daemon.result(#"{"cmd":"status"}"#)
            let memory = filled["memory"] as? [String: Any] ?? [:]
            #expect((memory["entries"] as? Int ?? 0) > 0, "the memory tier is empty after three gets: \(filled)")
            #expect((memory["bytes"] as? Int ?? 0) > 0)
            #expect(filled["pressure_events"] as? Int == 0)

            // One byte into the FIFO is one event.
            try Self.writeByte(to: fifo)
            var after: [String: Any] = [:]
            let purged = await eventually(timeout: .seconds(5), interval: .milliseconds(5)) {
                after = (try? await daemon.result(#"{"cmd":"status"}"#)) ?? [:]
                return after["pressure_events"] as? Int == 1
            }
            #expect(purged, "pressure_events did not become 1: \(after); log:\n\(daemon.log)")
            #expect((after["memory"] as? [String: Any])?["bytes"] as? Int == 0, "memory not purged: \(after)")
            #expect((after["memory"] as? [String: Any])?["entries"] as? Int == 0, "memory not purged: \(after)")
            // Counted before it is logged: the line follows.
            #expect(
                await eventually(timeout: .seconds(10)) { daemon.log.contains("memory pressure (systemd, event 1): purged the memory tier") },
                "the event was not logged:\n\(daemon.log)")

            // purge memory counts as an event too.
            let purgeMemory = try await daemon.result(#"{"cmd":"purge","tier":"memory"}"#)
            #expect(purgeMemory["purged_bytes"] is Int, "\(purgeMemory)")
            #expect(try await daemon.result(#"{"cmd":"status"}"#)["pressure_events"] as? Int == 2)

            // purge disk empties the cache.
            let before = try await daemon.result(#"{"cmd":"status"}"#)["cache"] as? [String: Any] ?? [:]
            #expect((before["bytes"] as? Int ?? 0) > 0)
            let purgeDisk = try await daemon.result(#"{"cmd":"purge","tier":"disk"}"#)
            #expect(purgeDisk["evicted"] as? Int == 3, "\(purgeDisk)")
            let emptied = try await daemon.result(#"{"cmd":"status"}"#)["cache"] as? [String: Any] ?? [:]
            #expect(emptied["bytes"] as? Int == 0, "\(emptied)")
            #expect(emptied["entries"] as? Int == 0, "\(emptied)")
            #expect(scratch.files(under: "imgd-data/cache").isEmpty, "files left: \(scratch.files(under: "imgd-data/cache"))")
            #expect(await daemon.stop() == 0, "log:\n\(daemon.log)")
        }
    }

    // MARK: - 8. The protocol's paths through the real binary

    @Test("protocol: errors keep the connection, get's options, evict, failed and retry, and a line over 1 MiB")
    func protocolPaths() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try await withRunningServer { server in
            let daemon = try await DaemonProcess.start(in: scratch.path)
            defer { daemon.killIfRunning() }
            let connection = try await KeptConnection(daemon.socket)

            // Errors that leave the connection usable.
            let bad = try await connection.call(#"{"id":1,"cmd":"#)
            #expect(ControlReply.errorCode(bad) == "bad_request", "\(bad)")
            #expect(bad["id"] is NSNull, "\(bad)")
            let notObject = try await connection.call(#"[1,2]"#)
            #expect(ControlReply.errorCode(notObject) == "bad_request", "\(notObject)")
            let pong = try await connection.call(#"{"id":2,"cmd":"ping"}"#)
            #expect(pong["id"] as? Int == 2)
            #expect((pong["result"] as? [String: Any])?["pong"] as? Bool == true, "\(pong)")
            let unknown = try await connection.call(#"{"id":3,"cmd":"frobnicate"}"#)
            #expect(ControlReply.errorCode(unknown) == "unknown_command", "\(unknown)")
            #expect(ControlReply.errorMessage(unknown).contains("frobnicate"), "\(unknown)")
            let noURL = try await connection.call(#"{"id":4,"cmd":"get"}"#)
            #expect(ControlReply.errorCode(noURL) == "invalid_argument", "\(noURL)")
            #expect(ControlReply.errorMessage(noURL).contains("url"), "\(noURL)")
            let badTier = try await connection.call(#"{"id":5,"cmd":"purge","tier":"x"}"#)
            #expect(ControlReply.errorCode(badTier) == "invalid_argument", "\(badTier)")
            #expect(ControlReply.errorMessage(badTier).contains("tier"), "\(badTier)")

            // get with data: exactly the server's bytes.
            let target = "/img/data.png?w=24&h=16"
            let url = server.url(target)
            let withData = try await connection.call(#"{"id":6,"cmd":"get","url":"\#(url)","data":true}"#)
            let got = withData["result"] as? [String: Any] ?? [:]
            let data = (got["data"] as? String).flatMap { Data(base64Encoded: $0) }
            #expect(data.map([UInt8].init) == TestHTTPServer.body(for: target), "\(withData)")
            #expect(got["bytes"] as? Int == TestHTTPServer.body(for: target)?.count)
            #expect(got["format"] as? String == "png")
            #expect(got["width"] as? Int == 24 && got["height"] as? Int == 16, "\(got)")
            let path = try #require(got["path"] as? String)
            #expect(FileManager.default.fileExists(atPath: path))

            // fetch: false on a miss; wait: false on a miss.
            let absent = server.url("/img/absent.png")
            let notFound = try await connection.call(#"{"cmd":"get","url":"\#(absent)","fetch":false}"#)
            #expect(ControlReply.errorCode(notFound) == "not_found", "\(notFound)")
            #expect(server.requestCount(prefix: "/img/absent.png") == 0, "fetch: false fetched")
            let later = server.url("/img/later.png")
            let pending = try await connection.call(#"{"cmd":"get","url":"\#(later)","wait":false}"#)
            #expect((pending["result"] as? [String: Any])?["pending"] as? Bool == true, "\(pending)")
            let appeared = await eventually(timeout: .seconds(10), interval: .milliseconds(5)) {
                let reply = try? await connection.call(#"{"cmd":"get","url":"\#(later)","fetch":false}"#)
                return reply?["ok"] as? Bool == true
            }
            #expect(appeared, "the image asked for with wait: false never reached the cache")

            // A 404 is http_404, remembered; failed lists it.
            let missing = server.url("/status/404")
            let failed = try await connection.call(#"{"cmd":"get","url":"\#(missing)"}"#)
            #expect(ControlReply.errorCode(failed) == "http_404", "\(failed)")
            let failures = try await connection.result(#"{"cmd":"failed"}"#)["failures"] as? [[String: Any]] ?? []
            #expect(
                failures.contains { ($0["url"] as? String)?.hasSuffix("/status/404") == true && $0["code"] as? String == "http_404" },
                "failed: \(failures)")

            // evict removes the file.
            let evicted = try await connection.result(#"{"cmd":"evict","urls":["\#(url)"]}"#)
            #expect(evicted["evicted"] as? Int == 1, "\(evicted)")
            #expect(!FileManager.default.fileExists(atPath: path), "evict left \(path)")
            let gone = try await connection.call(#"{"cmd":"get","url":"\#(url)","fetch":false}"#)
            #expect(ControlReply.errorCode(gone) == "not_found", "\(gone)")

            // retry {url}: a URL that failed once (404, then the image) is forgotten and fetched.
            let flaky = server.url("/flaky/once.png?fail=1&status=404")
            let first = try await connection.call(#"{"cmd":"get","url":"\#(flaky)"}"#)
            #expect(ControlReply.errorCode(first) == "http_404", "\(first)")
            let remembered = try await connection.result(#"{"cmd":"failed"}"#)["failures"] as? [[String: Any]] ?? []
            #expect(remembered.contains { ($0["url"] as? String)?.contains("/flaky/once.png") == true }, "failed: \(remembered)")
            let retried = try await connection.result(#"{"cmd":"retry","url":"\#(flaky)"}"#)
            #expect(retried["requeued"] as? Int == 1, "\(retried)")
            let fetched = await eventually(timeout: .seconds(10), interval: .milliseconds(5)) {
                let reply = try? await connection.call(#"{"cmd":"get","url":"\#(flaky)","fetch":false}"#)
                return reply?["ok"] as? Bool == true
            }
            #expect(fetched, "retry did not fetch the URL again")
            let afterRetry = try await connection.result(#"{"cmd":"failed"}"#)["failures"] as? [[String: Any]] ?? []
            #expect(!afterRetry.contains { ($0["url"] as? String)?.contains("/flaky/once.png") == true }, "failed: \(afterRetry)")

            // A line over 1 MiB: line_too_long, then the connection is closed.
            let long = try await KeptConnection(daemon.socket)
            let reply = try await long.sendOversizedLine(bytes: 10 << 20)
            #expect(ControlReply.errorCode(reply) == "line_too_long", "\(reply)")
            #expect(await long.isClosedByPeer(), "the connection stayed open after line_too_long")
            let stillServing = try await connection.call(#"{"cmd":"ping"}"#)
            #expect(stillServing["ok"] as? Bool == true)
            #expect(await daemon.stop() == 0, "log:\n\(daemon.log)")
        }
    }

    @Test("a held response does not hold back other transfers to the same new host (max-per-host, not one at a time)")
    func parallelToNewHost() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try await withRunningServer { server in
            let daemon = try await DaemonProcess.start(in: scratch.path)
            defer { daemon.killIfRunning() }
            // The first transfer to this host waits for its response; a get of another image on
            // the same host must not wait for it (the default max-per-host is 4).
            _ = try await daemon.result(#"{"cmd":"add","urls":["\#(server.url("/img/slow.png?gate=slow"))"]}"#)
            #expect(await server.waitForInFlight(atLeast: 1, timeout: .seconds(10)))
            let pending = try await daemon.result(#"{"cmd":"get","url":"\#(server.url("/img/quick.png"))","wait":false}"#)
            #expect(pending["pending"] as? Bool == true)
            let started = await server.waitForRequests(atLeast: 2, timeout: .seconds(5))
            #expect(started, "the second transfer waited for the first one's response; requests: \(server.requestLog)")
            server.openGate("slow")
            #expect(await daemon.stop() == 0, "log:\n\(daemon.log)")
        }
    }

    // MARK: - 9. imgctl against the real daemon

    /// Where `--socket` goes on imgctl's command line.
    enum OptionPlacement: String, CaseIterable, Sendable, CustomTestStringConvertible {
        /// `imgctl --socket S status`, as docs/usage.md's synopsis writes it.
        case beforeSubcommand
        /// `imgctl status --socket S`.
        case afterSubcommand

        var testDescription: String { rawValue }

        func arguments(socket: String, _ command: [String]) -> [String] {
            switch self {
            case .beforeSubcommand: ["--socket", socket] + command
            case .afterSubcommand: [command[0], "--socket", socket] + command.dropFirst()
            }
        }
    }

    @Test("imgctl: status, get (path and -o), an unreachable socket, a bad URL, warm --wait", arguments: OptionPlacement.allCases)
    func imgctlAgainstDaemon(placement: OptionPlacement) async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try await withRunningServer { server in
            let daemon = try await DaemonProcess.start(in: scratch.path)
            defer { daemon.killIfRunning() }
            let socket = daemon.socket
            // Without the service environment a test may have set around the daemon.
            let imgctlEnvironment = DaemonProcess.environment()

            let status = try await BinaryRunner.imgctl(placement.arguments(socket: socket, ["status"]), in: scratch.path, environment: imgctlEnvironment)
            #expect(status.status == 0, "\(status.stderr)")

            let got = try await BinaryRunner.imgctl(placement.arguments(socket: socket, ["get", server.url("/img/ctl.png")]), in: scratch.path, environment: imgctlEnvironment)
            #expect(got.status == 0, "\(got.stderr)")
            let path = got.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(path.hasPrefix("/") && FileManager.default.fileExists(atPath: path), "not a path that exists: \(got.stdout)")

            let target = "/img/out.jpg?w=20&h=10"
            let output = scratch.path + "/out.jpg"
            let written = try await BinaryRunner.imgctl(placement.arguments(socket: socket, ["get", server.url(target), "-o", output]), in: scratch.path, environment: imgctlEnvironment)
            #expect(written.status == 0, "\(written.stderr)")
            #expect(FileManager.default.contents(atPath: output).map([UInt8].init) == TestHTTPServer.body(for: target))

            let unreachable = try await BinaryRunner.imgctl(placement.arguments(socket: "/nonexistent", ["status"]), in: scratch.path, environment: imgctlEnvironment)
            #expect(unreachable.status == 3, "exit status \(unreachable.status): \(unreachable.stderr)")
            #expect(unreachable.stderr.contains("/nonexistent"), "\(unreachable.stderr)")

            let notURL = try await BinaryRunner.imgctl(placement.arguments(socket: socket, ["get", "not a url"]), in: scratch.path, environment: imgctlEnvironment)
            #expect(notURL.status == 1, "exit status \(notURL.status): \(notURL.stderr)")
            #expect(notURL.stderr.contains("invalid_argument") && notURL.stderr.contains("url"), "\(notURL.stderr)")

            let listURLs = (0..<3).map { server.url("/img/list\($0).png") }
            try scratch.write("links.txt", listURLs.joined(separator: "\n") + "\n")
            let warm = try await BinaryRunner.imgctl(placement.arguments(socket: socket, ["warm", scratch.path + "/links.txt", "--wait"]), in: scratch.path, environment: imgctlEnvironment)
            #expect(warm.status == 0, "exit status \(warm.status): \(warm.stdout)\(warm.stderr)")
            for url in listURLs {
                let cached = try await daemon.call(#"{"cmd":"get","url":"\#(url)","fetch":false}"#)
                #expect(cached["ok"] as? Bool == true, "\(url) is not cached after warm --wait: \(cached)")
            }
            #expect(await daemon.stop() == 0, "log:\n\(daemon.log)")
        }
    }

    @Test("fsck while running: a rewritten and a truncated file are found and removed, the rest kept; imgctl fsck exits 1, then 0")
    func onlineFsck() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try await withRunningServer { server in
            let daemon = try await DaemonProcess.start(in: scratch.path)
            defer { daemon.killIfRunning() }
            let urls = (0..<4).map { server.url("/img/fsck\($0).png") }
            var paths: [String] = []
            for url in urls {
                let got = try await daemon.result(#"{"cmd":"get","url":"\#(url)","data":true}"#)
                paths.append(try #require(got["path"] as? String))
            }
            // One file keeps its size but not its bytes; another loses its tail.
            let rewritten = try #require(FileManager.default.contents(atPath: paths[0]))
            try Data(rewritten.map { $0 ^ 0xFF }).write(to: URL(fileURLWithPath: paths[0]))
            #expect(truncate(paths[1], 10) == 0)

            let imgctlEnvironment = DaemonProcess.environment()
            let first = try await BinaryRunner.imgctl(["fsck", "--socket", daemon.socket], in: scratch.path, environment: imgctlEnvironment)
            #expect(first.status == 1, "exit status \(first.status): \(first.stdout)\(first.stderr)")
            #expect(first.stdout == "checked 4 entries: 2 bad, 2 removed\n", "\(first.stdout)")
            for url in urls[..<2] {
                let gone = try await daemon.call(#"{"cmd":"get","url":"\#(url)","fetch":false}"#)
                #expect((gone["error"] as? [String: Any])?["code"] as? String == "not_found", "\(url): \(gone)")
            }
            for (url, path) in zip(urls[2...], paths[2...]) {
                let kept = try await daemon.result(#"{"cmd":"get","url":"\#(url)","fetch":false}"#)
                #expect(kept["path"] as? String == path)
            }
            // Asked for again, the removed ones are fetched again, intact.
            let again = try await daemon.result(#"{"cmd":"get","url":"\#(urls[0])"}"#)
            #expect(again["source"] as? String == "network")
            #expect(FileManager.default.contents(atPath: paths[0]).map([UInt8].init) == TestHTTPServer.body(for: "/img/fsck0.png"))

            let second = try await BinaryRunner.imgctl(["fsck", "--socket", daemon.socket], in: scratch.path, environment: imgctlEnvironment)
            #expect(second.status == 0, "exit status \(second.status): \(second.stdout)\(second.stderr)")
            #expect(second.stdout == "checked 3 entries: 0 bad, 0 removed\n", "\(second.stdout)")
            #expect(daemon.log.contains("fsck: entry removed: "), "\(daemon.log)")
            #expect(await daemon.stop() == 0, "log:\n\(daemon.log)")
        }
    }

    // MARK: - Helpers

    static func cacheLimit(_ daemon: DaemonProcess) async throws -> Int? {
        (try await daemon.result(#"{"cmd":"status"}"#)["cache"] as? [String: Any])?["limit"] as? Int
    }

    static func jsonArray(_ strings: [String]) -> String {
        String(decoding: try! JSONSerialization.data(withJSONObject: strings, options: [.withoutEscapingSlashes]), as: UTF8.self)
    }

    static func statuses(_ messages: ArraySlice<String>) -> [String] {
        messages.flatMap { $0.split(separator: "\n") }.filter { $0.hasPrefix("STATUS=") }.map(String.init)
    }

    /// The inode of what is at `path`, or nil.
    static func inode(_ path: String) -> UInt64? {
        var status = stat()
        guard lstat(path, &status) == 0 else { return nil }
        return UInt64(status.st_ino)
    }

    /// A mode no socket file of imgd's has: marks a file so a test can tell it was not replaced.
    static let markerMode: mode_t = 0o604

    /// The permission bits of what is at `path`, or nil.
    static func mode(_ path: String) -> mode_t? {
        var status = stat()
        guard lstat(path, &status) == 0 else { return nil }
        return status.st_mode & 0o7777
    }

    /// The `S_IFMT` bits of what is at `path`, or nil.
    static func fileType(_ path: String) -> mode_t? {
        var status = stat()
        guard lstat(path, &status) == 0 else { return nil }
        return status.st_mode & S_IFMT
    }

    /// Binds a Unix stream socket at `path` and closes it without removing the file: what a
    /// crashed daemon leaves.
    static func leaveStaleSocket(at path: String) throws {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        defer { close(fd) }
        guard (try? UnixSocketAddress(path: path))?.withSockaddr({ bind(fd, $0, $1) }) == 0, listen(fd, 1) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
    }

    /// Writes one byte into the FIFO (imgd holds it open, so this does not block).
    static func writeByte(to fifo: String) throws {
        let fd = open(fifo, O_WRONLY | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        defer { close(fd) }
        var byte: UInt8 = 0x31
        guard write(fd, &byte, 1) == 1 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
    }

    /// Drops a text link list into the spool the way clients must: a dot-name, then a rename.
    func dropList(named name: String, lines: [String], into spool: String) throws {
        let temporary = spool + "/." + name + ".tmp"
        try (lines.joined(separator: "\n") + "\n").write(toFile: temporary, atomically: false, encoding: .utf8)
        guard rename(temporary, spool + "/" + name) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
    }
}

// MARK: - Support for this file

/// Sends one request on a new connection to `socket` and returns the reply, parsed.
private func request(_ socket: String, _ line: String) async throws -> [String: Any] {
    let reply = try await onOwnThread { Result { try ControlClient(path: socket).call(line) } }.get()
    return try KeptConnection.parseReply(reply)
}

/// The `result` of a successful request on a new connection (fails the test otherwise).
private func result(_ socket: String, _ line: String, sourceLocation: SourceLocation = #_sourceLocation) async throws -> [String: Any] {
    let reply = try await request(socket, line)
    #expect(reply["ok"] as? Bool == true, "reply: \(reply)", sourceLocation: sourceLocation)
    return reply["result"] as? [String: Any] ?? [:]
}
