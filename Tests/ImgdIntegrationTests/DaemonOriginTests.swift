import Foundation
import ImgdCore
import ImgdTestSupport
import Testing

/// The real daemon against origins as fleets meet them: https with HTTP/2, a failing name
/// lookup followed by good lists, and tarpits holding every slot while someone asks for an
/// image now. Each scenario is the one that broke imgd when it was tried from outside.
@Suite("Daemon against real origins (the real imgd)", .serialized, .timeLimit(.minutes(10)), .offThePool)
struct DaemonOriginTests {
    @Test("a list of 50 PNGs over https with HTTP/2 at the default caps: all 50 cached byte-exact")
    func http2List() async throws {
        let certificates = try await TestCertificates.shared()
        let server = try await TestHTTPServer.start(tls: TestHTTPServer.TLS(certificates.valid))
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let daemon = try await DaemonProcess.start(in: scratch.path, arguments: ["--ca-file", certificates.caFile])
        let targets = (0..<50).map { "/img/h2-\($0).png?w=20&h=20" }
        try daemon.drop("h2.txt", targets.map(server.url).joined(separator: "\n") + "\n")
        let list = try #require(await daemon.finishedList("h2.txt"), "log: \(daemon.log)")
        #expect(list["cached"] as? Int == 50, "\(list)")
        #expect(list["failed"] as? Int == 0)
        #expect(server.http2Requests == 50)
        for target in targets {
            #expect(try cachedBytes(scratch, server.url(target)) == TestHTTPServer.body(for: target))
        }
        _ = await daemon.stop()
        try await server.shutdown()
    }

    @Test("a list whose one URL does not resolve, then a list of 100 good URLs: all 100 cached, and get works after")
    func failedLookupThenGoodList() async throws {
        let server = try await TestHTTPServer.start()
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let daemon = try await DaemonProcess.start(in: scratch.path)
        try daemon.drop("bad.txt", "http://nonexistent.invalid/a.png\n")
        let bad = try #require(await daemon.finishedList("bad.txt"), "log: \(daemon.log)")
        #expect(bad["failed"] as? Int == 1)
        let report = try #require(await daemon.report("bad.txt", in: "failed"))
        #expect((report["failed_by_code"] as? [String: Any])?["dns"] as? Int == 1)

        let targets = (0..<100).map { "/img/after-dns-\($0).png" }
        try daemon.drop("good.txt", targets.map(server.url).joined(separator: "\n") + "\n")
        let good = try #require(await daemon.finishedList("good.txt"), "log: \(daemon.log)")
        #expect(good["cached"] as? Int == 100, "\(good)")
        #expect(good["failed"] as? Int == 0)
        let got = try await daemon.result(#"{"cmd":"get","url":"\#(server.url("/img/one-more.png"))"}"#)
        #expect((got["path"] as? String).map { FileManager.default.fileExists(atPath: $0) } == true)
        _ = await daemon.stop()
        try await server.shutdown()
    }

    @Test("two tarpit hosts hold all 8 slots with lists; a get of a fast URL is answered before any tarpit transfer ends")
    func getPassesTarpits() async throws {
        let tarpits = [try await TestHTTPServer.start(), try await TestHTTPServer.start()]
        let fast = try await TestHTTPServer.start()
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        // A 10-minute attempt: the tarpits can finish in it, so the pace rule lets them hold their
        // slots. (With the default 120 s it ends each as hopeless 3 s into its body, and the lists
        // fail and free every slot before a loaded machine has seen them all held.)
        let daemon = try await DaemonProcess.start(in: scratch.path, arguments: ["--timeout", "10m"])
        for (index, server) in tarpits.enumerated() {
            // A PNG head, 400 KB declared, then 2 KiB/s: the body would take ~200 s.
            let urls = (0..<6).map { server.url("/img/tarpit-\($0).png?w=16&h=16&bytes=400000&slow_bps=2048") }
            try daemon.drop("tarpit-\(index).txt", urls.joined(separator: "\n") + "\n")
        }
        for server in tarpits {
            #expect(await server.waitForInFlight(atLeast: 4, timeout: .seconds(30)), "log: \(daemon.log)")
        }
        let got = try await daemon.result(#"{"cmd":"get","url":"\#(fast.url("/img/now.png"))"}"#)
        #expect((got["path"] as? String).map { FileManager.default.fileExists(atPath: $0) } == true)
        // Answered while the tarpits still held their slots: no tarpit body had come (each takes
        // ~200 s), so the get did not wait for a slot to free itself.
        for index in tarpits.indices {
            let list = try await daemon.list("tarpit-\(index).txt")
            #expect(
                list?["state"] as? String == "active" && list?["cached"] as? Int == 0 && list?["failed"] as? Int == 0,
                "\(String(describing: list))")
        }
        let stats = try await daemon.result(#"{"cmd":"stats"}"#)
        #expect((stats["preempted"] as? Int ?? 0) >= 1, "\(stats)")
        #expect(stats["paced_out"] as? Int == 0, "no tarpit was paced out: \(stats)")
        _ = await daemon.stop()
        for server in tarpits + [fast] { try await server.shutdown() }
    }
}
