import Foundation
import ImgdTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// What one client may make the daemon hold, through the real binary and socket: URLs per
/// `add` (`max-add-urls`), requests held in all (`max-queued`, `queue_full`), images returned
/// inline (`max-data-bytes`, `too_large`), and `failed` in pages (`limit`, `after`, `next`).
@Suite("Daemon: memory stays bounded whatever a client asks", .timeLimit(.minutes(10)), .offThePool)
struct DaemonMemoryBoundsTests {
    @Test("add over max-add-urls: invalid_argument naming urls and the limit, nothing queued; at the limit it is taken")
    func addOverLimit() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let server = try await TestHTTPServer.start()
        defer { Task { try? await server.shutdown() } }
        let daemon = try await DaemonProcess.start(in: scratch.path, arguments: ["--max-add-urls", "3"])
        defer { if daemon.isRunning { kill(daemon.pid, SIGKILL) } }
        let connection = try await KeptConnection(daemon.socket)

        let over = (0..<4).map { "\"" + server.url("/img/over-\($0).png") + "\"" }.joined(separator: ",")
        let refused = try await connection.call(#"{"cmd":"add","urls":[\#(over)]}"#)
        #expect(ControlReply.errorCode(refused) == "invalid_argument", "\(refused)")
        #expect(ControlReply.errorMessage(refused).contains("\"urls\""), "\(refused)")
        #expect(ControlReply.errorMessage(refused).contains("4 URLs") && ControlReply.errorMessage(refused).contains("limit of 3"), "\(refused)")

        let atLimit = (0..<3).map { "\"" + server.url("/img/ok-\($0).png") + "\"" }.joined(separator: ",")
        let accepted = try await connection.result(#"{"cmd":"add","urls":[\#(atLimit)]}"#)
        #expect(accepted["accepted"] as? Int == 3, "\(accepted)")
        for index in 0..<3 {
            let url = server.url("/img/ok-\(index).png")
            let cached = await eventually(timeout: .seconds(30)) {
                try await connection.call(#"{"cmd":"get","url":"\#(url)","fetch":false}"#)["ok"] as? Bool == true
            }
            #expect(cached, "\(url) was not fetched; log: \(daemon.log)")
        }
        // Queued in order: had the refused URLs been queued, they would have gone first.
        #expect(server.requestCount(prefix: "/img/over-") == 0, "requests: \(server.requestLog)")
        #expect(await daemon.stop() == 0, "log:\n\(daemon.log)")
    }

    @Test("max-queued: add and get wait:false past it get queue_full and queue nothing; once the queue drains, add works")
    func queueFull() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let server = try await TestHTTPServer.start()
        defer { Task { try? await server.shutdown() } }
        let daemon = try await DaemonProcess.start(
            in: scratch.path, arguments: ["--max-queued", "4", "--max-parallel", "1"])
        defer { if daemon.isRunning { kill(daemon.pid, SIGKILL) } }
        let connection = try await KeptConnection(daemon.socket)

        // One held transfer and three queued behind it: four requests held, the limit.
        let held = try await connection.result(#"{"cmd":"add","urls":["\#(server.url("/img/held.png?gate=q"))"]}"#)
        #expect(held["accepted"] as? Int == 1)
        #expect(await server.waitForInFlight(atLeast: 1, timeout: .seconds(10)))
        let three = (0..<3).map { "\"" + server.url("/img/queued-\($0).png") + "\"" }.joined(separator: ",")
        #expect(try await connection.result(#"{"cmd":"add","urls":[\#(three)]}"#)["accepted"] as? Int == 3)

        let two = (0..<2).map { "\"" + server.url("/img/refused-\($0).png") + "\"" }.joined(separator: ",")
        let full = try await connection.call(#"{"cmd":"add","urls":[\#(two)]}"#)
        #expect(ControlReply.errorCode(full) == "queue_full", "\(full)")
        #expect(ControlReply.errorMessage(full).contains("max-queued") && ControlReply.errorMessage(full).contains("nothing of this request"), "\(full)")
        let notWaiting = try await connection.call(#"{"cmd":"get","url":"\#(server.url("/img/refused-w.png"))","wait":false}"#)
        #expect(ControlReply.errorCode(notWaiting) == "queue_full", "\(notWaiting)")
        // The connection is still usable, and what is already cached is still answered.
        #expect(try await connection.call(#"{"cmd":"ping"}"#)["ok"] as? Bool == true)

        server.openGate("q")
        let after = server.url("/img/after.png")
        let taken = await eventually(timeout: .seconds(30)) {
            try await connection.call(#"{"cmd":"add","urls":["\#(after)"]}"#)["ok"] as? Bool == true
        }
        #expect(taken, "add still refused after the queue drained; log: \(daemon.log)")
        let fetched = await eventually(timeout: .seconds(30)) {
            try await connection.call(#"{"cmd":"get","url":"\#(after)","fetch":false}"#)["ok"] as? Bool == true
        }
        #expect(fetched)
        #expect(server.requestCount(prefix: "/img/refused-") == 0, "requests: \(server.requestLog)")
        #expect(server.requestCount(prefix: "/img/queued-") == 3)
        #expect(await daemon.stop() == 0, "log:\n\(daemon.log)")
    }

    @Test("max-queued-bytes: an add of long URLs that would take the held URLs' bytes past it gets queue_full naming it and queues nothing, though far under max-queued; one within it is taken")
    func queueFullByBytes() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let server = try await TestHTTPServer.start()
        defer { Task { try? await server.shutdown() } }
        let daemon = try await DaemonProcess.start(
            in: scratch.path, arguments: ["--max-queued-bytes", "64KiB", "--max-parallel", "1"])
        defer { if daemon.isRunning { kill(daemon.pid, SIGKILL) } }
        let connection = try await KeptConnection(daemon.socket)
        // URLs of ~8,000 bytes, as an abuser would send (the longest taken is 8 KiB).
        let padding = String(repeating: "p", count: 8000)
        func long(_ name: String) -> String { "\"" + server.url("/img/\(name).png?pad=\(padding)") + "\"" }

        // One held transfer, so what is added stays queued behind it.
        let held = try await connection.result(#"{"cmd":"add","urls":["\#(server.url("/img/held.png?gate=b"))"]}"#)
        #expect(held["accepted"] as? Int == 1)
        #expect(await server.waitForInFlight(atLeast: 1, timeout: .seconds(10)))
        // Five of ~8 KB: ~40 KB, taken.
        let five = (0..<5).map { long("long-ok-\($0)") }.joined(separator: ",")
        #expect(try await connection.result(#"{"cmd":"add","urls":[\#(five)]}"#)["accepted"] as? Int == 5)
        // Four more: ~72 KB in all, past 64 KiB though only 10 requests: refused, all of them.
        let four = (0..<4).map { long("long-refused-\($0)") }.joined(separator: ",")
        let full = try await connection.call(#"{"cmd":"add","urls":[\#(four)]}"#)
        #expect(ControlReply.errorCode(full) == "queue_full", "\(full)")
        #expect(ControlReply.errorMessage(full).contains("max-queued-bytes") && ControlReply.errorMessage(full).contains("nothing of this request"), "\(full)")

        server.openGate("b")
        let fetched = await eventually(timeout: .seconds(30)) { server.requestCount(prefix: "/img/long-ok-") == 5 }
        #expect(fetched, "log: \(daemon.log)")
        // Once drained, an add of as many is taken; the refused URLs were never requested.
        let later = (0..<4).map { long("long-later-\($0)") }.joined(separator: ",")
        let taken = await eventually(timeout: .seconds(30)) {
            try await connection.call(#"{"cmd":"add","urls":[\#(later)]}"#)["ok"] as? Bool == true
        }
        #expect(taken, "add still refused after the queue drained; log: \(daemon.log)")
        #expect(await eventually(timeout: .seconds(30)) { server.requestCount(prefix: "/img/long-later-") == 4 })
        #expect(server.requestCount(prefix: "/img/long-refused-") == 0)
        #expect(await daemon.stop() == 0, "log:\n\(daemon.log)")
    }

    @Test("get data:true over max-data-bytes: too_large (fetched, from memory, from disk), path still works; a small one on the same connection is returned")
    func dataTooLarge() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let server = try await TestHTTPServer.start()
        defer { Task { try? await server.shutdown() } }
        let daemon = try await DaemonProcess.start(in: scratch.path, arguments: ["--max-data-bytes", "20KiB"])
        defer { if daemon.isRunning { kill(daemon.pid, SIGKILL) } }
        let connection = try await KeptConnection(daemon.socket)
        let bigTarget = "/img/big.png?bytes=60000"
        let big = server.url(bigTarget)
        let bigBody = try #require(TestHTTPServer.body(for: bigTarget))
        #expect(bigBody.count > 20 * 1024)

        let fetched = try await connection.call(#"{"cmd":"get","url":"\#(big)","data":true}"#)
        #expect(ControlReply.errorCode(fetched) == "too_large", "\(fetched)")
        #expect(ControlReply.errorMessage(fetched).contains("\(bigBody.count) bytes") && ControlReply.errorMessage(fetched).contains("path"), "\(fetched)")
        let fromMemory = try await connection.call(#"{"cmd":"get","url":"\#(big)","data":true}"#)
        #expect(ControlReply.errorCode(fromMemory) == "too_large", "\(fromMemory)")
        #expect(try await connection.result(#"{"cmd":"purge","tier":"memory"}"#)["purged_bytes"] != nil)
        let fromDisk = try await connection.call(#"{"cmd":"get","url":"\#(big)","data":true}"#)
        #expect(ControlReply.errorCode(fromDisk) == "too_large", "\(fromDisk)")

        let byPath = try await connection.result(#"{"cmd":"get","url":"\#(big)"}"#)
        let path = try #require(byPath["path"] as? String)
        #expect(FileManager.default.contents(atPath: path).map(Array.init) == bigBody)

        let smallTarget = "/img/small.png?w=16&h=16"
        let small = try await connection.result(#"{"cmd":"get","url":"\#(server.url(smallTarget))","data":true}"#)
        let data = (small["data"] as? String).flatMap { Data(base64Encoded: $0) }
        #expect(data.map(Array.init) == TestHTTPServer.body(for: smallTarget), "\(small)")
        #expect(server.requestCount(prefix: "/img/big.png") == 1)
        #expect(await daemon.stop() == 0, "log:\n\(daemon.log)")
    }

    @Test("failed in pages: a list's failures by limit and after, next null at the end; the remembered ones by URL; bad limit and cursors are invalid_argument")
    func failedPages() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let server = try await TestHTTPServer.start()
        defer { Task { try? await server.shutdown() } }
        let daemon = try await DaemonProcess.start(in: scratch.path)
        defer { if daemon.isRunning { kill(daemon.pid, SIGKILL) } }
        let connection = try await KeptConnection(daemon.socket)

        // 25 lines that are not http(s) URLs: failed as bad_url when claimed, no network.
        try daemon.drop("bad.txt", (1...25).map { "ftp://example.test/\($0)" }.joined(separator: "\n") + "\n")
        let list = try #require(await daemon.finishedList("bad.txt"), "log: \(daemon.log)")
        #expect(list["failed"] as? Int == 25)

        var lines: [Int] = []
        var after: String?
        var pages = 0
        repeat {
            let cursor = after.map { #","after":"\#($0)""# } ?? ""
            let page = try await connection.result(#"{"cmd":"failed","list":"bad.txt","limit":10\#(cursor)}"#)
            let failures = page["failures"] as? [[String: Any]] ?? []
            lines += failures.compactMap { $0["line"] as? Int }
            #expect(failures.allSatisfy { $0["code"] as? String == "bad_url" && $0["list"] as? String == "bad.txt" })
            pages += 1
            after = page["next"] as? String
            #expect(page.keys.contains("next"), "no next member: \(page)")
            if pages < 3 { #expect(after != nil && failures.count == 10, "page \(pages): \(page)") }
        } while after != nil && pages < 10
        #expect(pages == 3)
        #expect(lines == Array(1...25))

        // The default and most: 1,000; more is invalid_argument naming limit.
        let whole = try await connection.result(#"{"cmd":"failed","list":"bad.txt"}"#)
        #expect((whole["failures"] as? [Any])?.count == 25)
        #expect(whole["next"] is NSNull, "\(whole)")
        let tooMany = try await connection.call(#"{"cmd":"failed","list":"bad.txt","limit":1001}"#)
        #expect(ControlReply.errorCode(tooMany) == "invalid_argument" && ControlReply.errorMessage(tooMany).contains("\"limit\""), "\(tooMany)")
        let thousand = try await connection.call(#"{"cmd":"failed","limit":1000}"#)
        #expect(thousand["ok"] as? Bool == true, "\(thousand)")
        for bad in ["nonsense!", "", "bDpub3Q"] {  // not base64; empty; "l:not" encoded
            let reply = try await connection.call(#"{"cmd":"failed","list":"bad.txt","after":"\#(bad)"}"#)
            #expect(ControlReply.errorCode(reply) == "invalid_argument" && ControlReply.errorMessage(reply).contains("\"after\""), "\(bad): \(reply)")
        }

        // The remembered failures: five 404s, in pages of two, in URL order.
        let missing = (0..<5).map { server.url("/status/404?n=\($0)") }
        for url in missing {
            let reply = try await connection.call(#"{"cmd":"get","url":"\#(url)"}"#)
            #expect(ControlReply.errorCode(reply) == "http_404", "\(reply)")
        }
        var urls: [String] = []
        after = nil
        pages = 0
        repeat {
            let cursor = after.map { #","after":"\#($0)""# } ?? ""
            let page = try await connection.result(#"{"cmd":"failed","limit":2\#(cursor)}"#)
            urls += (page["failures"] as? [[String: Any]] ?? []).compactMap { $0["url"] as? String }
            pages += 1
            after = page["next"] as? String
        } while after != nil && pages < 10
        #expect(pages == 3)
        #expect(urls == missing.sorted(), "\(urls)")
        // A list's cursor is not the remembered failures', and the other way round.
        let listCursor = try #require(
            try await connection.result(#"{"cmd":"failed","list":"bad.txt","limit":1}"#)["next"] as? String)
        let crossed = try await connection.call(#"{"cmd":"failed","after":"\#(listCursor)"}"#)
        #expect(ControlReply.errorCode(crossed) == "invalid_argument", "\(crossed)")
        #expect(await daemon.stop() == 0, "log:\n\(daemon.log)")
    }

    @Test("imgctl failed --list follows next: 1,500 failures in two pages, each line once, the header once")
    func imgctlFollowsPages() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let daemon = try await DaemonProcess.start(in: scratch.path)
        defer { if daemon.isRunning { kill(daemon.pid, SIGKILL) } }
        try daemon.drop("many.txt", (1...1500).map { "ftp://example.test/\($0)" }.joined(separator: "\n") + "\n")
        let list = try #require(await daemon.finishedList("many.txt"), "log: \(daemon.log)")
        #expect(list["failed"] as? Int == 1500)

        let imgctl = URL(fileURLWithPath: BinaryRunner.imgdPath).deletingLastPathComponent().appendingPathComponent("imgctl").path
        let output = try await ChildProcess.run(
            imgctl, ["failed", "--list", "many.txt", "--socket", daemon.socket], in: scratch.path, timeout: .seconds(60))
        #expect(output.status == 0, "stderr: \(output.stderr)")
        let lines = output.stdout.split(separator: "\n")
        #expect(lines.filter { $0.hasPrefix("CODE") }.count == 1)
        let places = lines.compactMap { line in line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first }
        #expect(places.filter { $0.hasPrefix("many.txt:") }.map { String($0) } == (1...1500).map { "many.txt:\($0)" })

        let json = try await ChildProcess.run(
            imgctl, ["--json", "failed", "--list", "many.txt", "--socket", daemon.socket], in: scratch.path, timeout: .seconds(60))
        #expect(json.status == 0)
        #expect(json.stdout.split(separator: "\n").count == 2, "one reply line per page")
        #expect(await daemon.stop() == 0, "log:\n\(daemon.log)")
    }
}
