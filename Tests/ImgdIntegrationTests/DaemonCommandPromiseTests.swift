import Foundation
import ImgdCore
import ImgdTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// What Protocol.md promises of `add`'s `priority` and `pin`, `cancel` of a URL, a second `fsck`,
/// and the `failed` and `memory_pressure` events, through the real daemon and its subscribers.
@Suite("imgd: add priority and pin, cancel of a URL, a second fsck, failed and memory_pressure events (the real binary)", .timeLimit(.minutes(10)), .offThePool)
struct DaemonCommandPromiseTests {
    // MARK: - add

    @Test("add priority high, one transfer slot: it goes before a normal add queued earlier, and takes the slot of a running normal add (re-queued, not failed)")
    func addPriority() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try await withRunningServer { server in
            let daemon = try await DaemonProcess.start(in: scratch.path, arguments: ["--max-parallel", "1"])
            defer { if daemon.isRunning { kill(daemon.pid, SIGKILL) } }
            let events = try await daemon.subscribe(["fetched", "failed"])
            defer { events.close() }

            // The slot is held by an on-demand get (which nothing preempts) while two adds queue.
            let blocker = "/img/blocker.png?gate=first"
            #expect(try await daemon.result(#"{"cmd":"get","url":"\#(server.url(blocker))","wait":false}"#)["pending"] as? Bool == true)
            #expect(await server.waitForInFlight(atLeast: 1, timeout: .seconds(10)), "the blocker did not start")
            #expect(try await daemon.result(#"{"cmd":"add","urls":["\#(server.url("/img/normal.png"))"]}"#)["accepted"] as? Int == 1)
            #expect(try await daemon.result(#"{"cmd":"add","urls":["\#(server.url("/img/high.png"))"],"priority":"high"}"#)["accepted"] as? Int == 1)
            server.openGate("first")
            for name in ["normal", "high"] {
                let fetched = await events.first("fetched") { ($0["url"] as? String)?.hasSuffix("/img/\(name).png") == true }
                #expect(fetched != nil, "\(name) was not fetched: \(events.events.map(\.line))")
            }
            #expect(server.requestLog == [blocker, "/img/high.png", "/img/normal.png"], "order: \(server.requestLog)")

            // A normal add holding the slot gives it up to a high one, and is fetched after it.
            let held = "/img/held-prefetch.png?gate=second"
            #expect(try await daemon.result(#"{"cmd":"add","urls":["\#(server.url(held))"]}"#)["accepted"] as? Int == 1)
            #expect(await server.waitForRequests(atLeast: 4, timeout: .seconds(10)), "the normal add did not start: \(server.requestLog)")
            #expect(try await daemon.result(#"{"cmd":"add","urls":["\#(server.url("/img/urgent.png"))"],"priority":"high"}"#)["accepted"] as? Int == 1)
            let urgent = await events.first("fetched") { ($0["url"] as? String)?.hasSuffix("/img/urgent.png") == true }
            #expect(urgent != nil, "the high add waited behind the running normal one: \(server.requestLog)")
            server.openGate("second")
            let resumed = await events.first("fetched") { ($0["url"] as? String)?.hasSuffix(held) == true }
            #expect(resumed != nil, "the preempted add was not fetched: \(events.events.map(\.line))")
            #expect(server.requestCount(held) == 2, "the preempted add was asked \(server.requestCount(held)) times: \(server.requestLog)")
            #expect(!events.events.contains { $0.name == "failed" }, "\(events.events.map(\.line))")
            // The engine's counters are a snapshot of its last turn.
            let preempted = await eventually(timeout: .seconds(10)) { try await daemon.result(#"{"cmd":"stats"}"#)["preempted"] as? Int == 1 }
            #expect(preempted, "stats.preempted is not 1")
            #expect(await daemon.stop() == 0, "log:\n\(daemon.log)")
        }
    }

    @Test("add with pin: under a 1 MiB cap, the pinned image (the least recently used) survives the evictions that take the unpinned one, and a disk purge")
    func addPin() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try await withRunningServer { server in
            let daemon = try await DaemonProcess.start(in: scratch.path, arguments: ["--disk-limit", "1MiB"])
            defer { if daemon.isRunning { kill(daemon.pid, SIGKILL) } }
            let events = try await daemon.subscribe(["fetched"])
            defer { events.close() }
            let pinnedTarget = "/img/pinned.png?bytes=300000"
            let pinned = server.url(pinnedTarget)
            // Its file, found by its key: a get would make it recently used and prove nothing.
            let pinnedKey = try ImageURL(pinned).cacheKey.relativePath
            let pinnedFile = scratch.path + "/imgd-data/cache/" + pinnedKey
            #expect(try await daemon.result(#"{"cmd":"add","urls":["\#(pinned)"],"pin":"1h"}"#)["accepted"] as? Int == 1)
            #expect(await events.first("fetched") { $0["url"] as? String == pinned } != nil, "\(events.events.map(\.line))")
            let pinnedBytes = (try await daemon.result(#"{"cmd":"status"}"#)["cache"] as? [String: Any])?["pinned_bytes"] as? Int ?? 0
            #expect(pinnedBytes > 250_000, "status.cache.pinned_bytes is \(pinnedBytes)")

            // Fetched after it, so more recently used: without the pin, the pinned one goes first.
            let plainURL = server.url("/img/plain.png?bytes=300000")
            let plain = try await daemon.result(#"{"cmd":"get","url":"\#(plainURL)"}"#)
            #expect(plain["source"] as? String == "network", "\(plain)")
            let plainFile = scratch.path + "/imgd-data/cache/" + (try ImageURL(plainURL).cacheKey.relativePath)
            for index in 0..<5 {
                let got = try await daemon.result(#"{"cmd":"get","url":"\#(server.url("/img/filler\(index).png?bytes=300000"))"}"#)
                #expect(got["path"] is String, "\(got)")
            }
            let evicted = (try await daemon.result(#"{"cmd":"stats"}"#)["disk"] as? [String: Any])?["evicted"] as? Int ?? 0
            #expect(evicted >= 3, "7 images of 300 KB under 1 MiB, \(evicted) evicted")
            #expect(!FileManager.default.fileExists(atPath: plainFile), "the unpinned, more recently used image was kept")
            #expect(FileManager.default.fileExists(atPath: pinnedFile), "the pinned image was evicted; log:\n\(daemon.log)")

            // A disk purge leaves pinned entries too.
            let purge = try await daemon.result(#"{"cmd":"purge","tier":"disk"}"#)
            #expect((purge["evicted"] as? Int ?? 0) >= 1, "\(purge)")
            let cache = try await daemon.result(#"{"cmd":"status"}"#)["cache"] as? [String: Any] ?? [:]
            #expect(cache["entries"] as? Int == 1 && cache["pinned_bytes"] as? Int == pinnedBytes, "\(cache)")
            #expect(FileManager.default.fileExists(atPath: pinnedFile), "purge removed the pinned image")
            let kept = try await daemon.result(#"{"cmd":"get","url":"\#(pinned)","fetch":false}"#)
            #expect((kept["path"] as? String)?.hasSuffix("/" + pinnedKey) == true, "\(kept)")
            #expect(server.requestCount(pinnedTarget) == 1, "the pinned image was fetched again")
            #expect(await daemon.stop() == 0, "log:\n\(daemon.log)")
        }
    }

    // MARK: - cancel

    @Test("cancel of a URL: a running download's waiter gets cancelled and the transfer ends; a queued one is never asked for; a URL with nothing to cancel answers 0")
    func cancelURL() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try await withRunningServer { server in
            let daemon = try await DaemonProcess.start(in: scratch.path, arguments: ["--max-parallel", "1"])
            defer { if daemon.isRunning { kill(daemon.pid, SIGKILL) } }
            let events = try await daemon.subscribe(["failed"])
            defer { events.close() }
            let running = server.url("/img/running.png?gate=never")
            let waiter = try await KeptConnection(daemon.socket)
            let waiting = Task { try await waiter.callRaw(#"{"cmd":"get","url":"\#(running)"}"#) }
            #expect(await server.waitForInFlight(atLeast: 1, timeout: .seconds(10)), "the download did not start")
            // Queued behind it (one slot).
            let queuedTarget = "/img/queued.png"
            #expect(try await daemon.result(#"{"cmd":"add","urls":["\#(server.url(queuedTarget))"]}"#)["accepted"] as? Int == 1)

            #expect(try await daemon.result(#"{"cmd":"cancel","url":"\#(server.url(queuedTarget))"}"#)["cancelled"] as? Int == 1)
            let queuedFailed = await events.first("failed") { ($0["url"] as? String)?.hasSuffix(queuedTarget) == true }
            #expect(queuedFailed?.data["code"] as? String == "cancelled", "\(events.events.map(\.line))")

            #expect(try await daemon.result(#"{"cmd":"cancel","url":"\#(running)"}"#)["cancelled"] as? Int == 1)
            let reply = try KeptConnection.parseReply(try await waiting.value)
            #expect((reply["error"] as? [String: Any])?["code"] as? String == "cancelled", "\(reply)")
            #expect(await eventually(timeout: .seconds(10)) { server.inFlight == 0 }, "the transfer still runs")

            // Nothing left of either: nothing to cancel, and the queued URL was never asked for.
            #expect(try await daemon.result(#"{"cmd":"cancel","url":"\#(running)"}"#)["cancelled"] as? Int == 0)
            #expect(server.requestCount(queuedTarget) == 0, "\(server.requestLog)")
            // The engine's counters are a snapshot of its last turn.
            let counted = await eventually(timeout: .seconds(10)) { try await daemon.result(#"{"cmd":"stats"}"#)["cancelled"] as? Int == 2 }
            #expect(counted, "stats.cancelled is not 2")
            #expect(await daemon.stop() == 0, "log:\n\(daemon.log)")
        }
    }

    // MARK: - fsck

    @Test("fsck while another fsck runs: busy, and the connection stays usable; the first finishes (a bad entry removed, an evicted event with reason fsck); a third runs")
    func fsckBusy() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try await withRunningServer { server in
            let daemon = try await DaemonProcess.start(in: scratch.path)
            defer { if daemon.isRunning { kill(daemon.pid, SIGKILL) } }
            let events = try await daemon.subscribe(["evicted"])
            defer { events.close() }
            let damaged = try await daemon.result(#"{"cmd":"get","url":"\#(server.url("/img/damaged.png"))"}"#)
            _ = try await daemon.result(#"{"cmd":"get","url":"\#(server.url("/img/intact.png"))"}"#)
            let file = try #require(damaged["path"] as? String, "\(damaged)")
            var bytes = try Array(Data(contentsOf: URL(fileURLWithPath: file)))
            bytes[bytes.count / 2] ^= 0xFF
            try Data(bytes).write(to: URL(fileURLWithPath: file))

            // The index's write lock, held by sqlite3 until the test lets go: the first fsck
            // cannot remove its bad entry, so it is still running while the second is asked. (It
            // must be let go within the daemon's 5 s busy timeout, or the first fsck fails.)
            let lock = try IndexWriteLock(index: scratch.path + "/imgd-data/cache/index.sqlite", in: scratch.path)
            defer { lock.release() }
            try #require(await eventually(timeout: .seconds(20)) { lock.isHeld }, "sqlite3 did not take the lock: \(lock.output)")
            let first = try await KeptConnection(daemon.socket)
            let firstReply = Task { try await first.callRaw(#"{"id":1,"cmd":"fsck"}"#) }
            #expect(await eventually(timeout: .seconds(20)) { daemon.log.contains("fsck: checking every entry") }, "log:\n\(daemon.log)")

            let second = try await KeptConnection(daemon.socket)
            let refused = try await second.call(#"{"id":2,"cmd":"fsck"}"#)
            let error = refused["error"] as? [String: Any] ?? [:]
            #expect(error["code"] as? String == "busy", "\(refused)")
            #expect((error["message"] as? String)?.contains("already running") == true, "\(refused)")
            #expect(try await second.call(#"{"cmd":"ping"}"#)["ok"] as? Bool == true, "the refused connection is not usable")

            lock.release()
            let done = try KeptConnection.parseReply(try await firstReply.value)
            let result = done["result"] as? [String: Any] ?? [:]
            #expect(result["checked"] as? Int == 2 && result["bad"] as? Int == 1 && result["removed"] as? Int == 1, "\(done)")
            let evicted = await events.first("evicted") { $0["reason"] as? String == "fsck" }
            #expect(evicted?.data["count"] as? Int == 1, "\(events.events.map(\.line))")
            let third = try await second.call(#"{"id":3,"cmd":"fsck"}"#)
            #expect((third["result"] as? [String: Any])?["checked"] as? Int == 1, "\(third)")
            #expect(await daemon.stop() == 0, "log:\n\(daemon.log)")
        }
    }

    // MARK: - Events

    @Test("failed events: an added URL that answers 404 (asked once), a list's 410; an unusable URL in add is rejected, not an event")
    func failedEvents() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try await withRunningServer { server in
            let daemon = try await DaemonProcess.start(in: scratch.path)
            defer { if daemon.isRunning { kill(daemon.pid, SIGKILL) } }
            let events = try await daemon.subscribe(["failed"])
            defer { events.close() }
            let missing = server.url("/status/404")
            let added = try await daemon.result(#"{"cmd":"add","urls":["\#(missing)","ftp://old.example/x.gif"]}"#)
            #expect(added["accepted"] as? Int == 1, "\(added)")
            let rejected = added["rejected"] as? [[String: Any]] ?? []
            #expect(rejected.count == 1 && rejected.first?["code"] as? String == "bad_url", "\(added)")
            let fromAdd = await events.first("failed") { $0["url"] as? String == missing }
            #expect(fromAdd?.data["code"] as? String == "http_404", "\(events.events.map(\.line))")
            #expect((fromAdd?.data["message"] as? String)?.isEmpty == false, "\(events.events.map(\.line))")

            let gone = server.url("/status/410")
            try daemon.drop("gone.txt", gone + "\n")
            let fromList = await events.first("failed") { $0["url"] as? String == gone }
            #expect(fromList?.data["code"] as? String == "http_410", "\(events.events.map(\.line))")
            #expect(server.requestCount("/status/404") == 1 && server.requestCount("/status/410") == 1, "\(server.requestLog)")
            #expect(!events.events.contains { ($0.data["url"] as? String)?.hasPrefix("ftp:") == true }, "\(events.events.map(\.line))")
            #expect(await daemon.stop() == 0, "log:\n\(daemon.log)")
        }
    }

    @Test("get records its outcome like add and a list: a download is a fetched event, a failure (waiting or not) a failed event and a count in stats.failures; a disk hit is no event")
    func getOutcomeEvents() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try await withRunningServer { server in
            let daemon = try await DaemonProcess.start(in: scratch.path)
            defer { if daemon.isRunning { kill(daemon.pid, SIGKILL) } }
            let events = try await daemon.subscribe(["fetched", "failed"])
            defer { events.close() }
            let image = server.url("/img/got.png?w=20&h=20")
            #expect(try await daemon.result(#"{"cmd":"get","url":"\#(image)"}"#)["source"] as? String == "network")
            let fetched = await events.first("fetched") { $0["url"] as? String == image }
            #expect(fetched?.data["bytes"] as? Int == TestHTTPServer.body(for: "/img/got.png?w=20&h=20")?.count, "\(events.events.map(\.line))")
            #expect(fetched?.data["format"] as? String == "png", "\(events.events.map(\.line))")

            let missing = server.url("/status/404")
            let refused = try await daemon.call(#"{"cmd":"get","url":"\#(missing)"}"#)
            #expect((refused["error"] as? [String: Any])?["code"] as? String == "http_404", "\(refused)")
            let failed = await events.first("failed") { $0["url"] as? String == missing }
            #expect(failed?.data["code"] as? String == "http_404", "\(events.events.map(\.line))")

            let gone = server.url("/status/410")
            #expect(try await daemon.result(#"{"cmd":"get","url":"\#(gone)","wait":false}"#)["pending"] as? Bool == true)
            let failedLater = await events.first("failed") { $0["url"] as? String == gone }
            #expect(failedLater?.data["code"] as? String == "http_410", "\(events.events.map(\.line))")

            // A hit from disk or memory downloads nothing: no event.
            #expect(try await daemon.result(#"{"cmd":"get","url":"\#(image)"}"#)["source"] as? String != "network")
            let failures = (try await daemon.result(#"{"cmd":"stats"}"#)["failures"] as? [String: Any]) ?? [:]
            #expect(failures["http_404"] as? Int == 1 && failures["http_410"] as? Int == 1, "\(failures)")
            #expect(await daemon.stop() == 0, "log:\n\(daemon.log)")
            #expect(events.events.filter { $0.name == "fetched" }.count == 1, "\(events.events.map(\.line))")
        }
    }

    @Test("memory_pressure events: a byte in MEMORY_PRESSURE_WATCH's FIFO (origin systemd, the bytes purged) and purge of the memory tier (origin command), counted 1 and 2")
    func memoryPressureEvents() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let fifo = scratch.path + "/memory.pressure"
        try #require(mkfifo(fifo, 0o600) == 0)
        try await withRunningServer { server in
            let daemon = try await DaemonProcess.start(in: scratch.path, environment: ["MEMORY_PRESSURE_WATCH": fifo])
            defer { if daemon.isRunning { kill(daemon.pid, SIGKILL) } }
            let events = try await daemon.subscribe(["memory_pressure"])
            defer { events.close() }
            _ = try await daemon.result(#"{"cmd":"get","url":"\#(server.url("/img/held-in-memory.png?w=32&h=32"))"}"#)
            let held = (try await daemon.result(#"{"cmd":"status"}"#)["memory"] as? [String: Any])?["bytes"] as? Int ?? 0
            #expect(held > 0, "the memory tier holds nothing")
            #expect(await eventually { daemon.log.contains("FIFO from MEMORY_PRESSURE_WATCH") }, "log:\n\(daemon.log)")

            let fd = open(fifo, O_WRONLY | O_NONBLOCK | O_CLOEXEC)
            try #require(fd >= 0, "cannot open the FIFO: \(errno)")
            var byte: UInt8 = 0x31
            #expect(write(fd, &byte, 1) == 1)
            close(fd)
            let fromSystem = await events.first("memory_pressure", timeout: .seconds(20))
            #expect(fromSystem?.data["origin"] as? String == "systemd", "\(events.events.map(\.line))")
            #expect(fromSystem?.data["purged_bytes"] as? Int == held, "\(events.events.map(\.line))")
            #expect(fromSystem?.data["count"] as? Int == 1, "\(events.events.map(\.line))")

            _ = try await daemon.result(#"{"cmd":"purge","tier":"memory"}"#)
            let fromCommand = await events.first("memory_pressure") { $0["origin"] as? String == "command" }
            #expect(fromCommand?.data["count"] as? Int == 2 && fromCommand?.data["purged_bytes"] as? Int == 0, "\(events.events.map(\.line))")
            #expect(await daemon.stop() == 0, "log:\n\(daemon.log)")
        }
    }
}
