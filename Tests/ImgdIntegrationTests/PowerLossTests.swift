import Foundation
import ImgdCore
import ImgdTestSupport
import Testing

/// What a power cut can leave that a process kill cannot: data the kernel had not written yet.
/// imgd never fsyncs a cache file, so after a power cut an entry's index row may be on disk
/// while its file's blocks are not; ext4 (and other filesystems) can then show the file at its
/// full size, full of zero bytes. These tests make that state by hand — the daemon is killed
/// with SIGKILL so its shutdown is unclean, then a cached file is overwritten with zeros of the
/// same size — and prove the daemon never serves it.
@Suite("Power loss: lost file data under a committed row", .timeLimit(.minutes(3)), .offThePool)
struct PowerLossTests {
    @Test("a file zeroed after an unclean shutdown is never served: get, get without fetch and a list each find it bad, remove it and fetch it again")
    func zeroedFileAfterUncleanShutdown() async throws {
        let server = try await TestHTTPServer.start()
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        // One body written in place (under 64 KiB), one spilled to tmp/ and renamed (over it),
        // and one that a list asks for.
        let inPlace = "/img/in-place.png?bytes=20000"
        let spilled = "/img/spilled.png?bytes=200000"
        let listed = "/img/listed.png?bytes=30000"
        let targets = [inPlace, spilled, listed]
        #expect(try #require(TestHTTPServer.body(for: inPlace)).count < 64 * 1024)
        #expect(try #require(TestHTTPServer.body(for: spilled)).count > 64 * 1024)

        var daemon = try await DaemonProcess.start(in: scratch.path)
        for target in targets {
            let reply = try await daemon.result(#"{"cmd":"get","url":"\#(server.url(target))"}"#)
            #expect(reply["source"] as? String == "network")
        }
        // `get` answers once the row is committed; the index says so before the kill.
        let index = scratch.path + "/imgd-data/cache/index.sqlite"
        #expect(try await sqlite(index, "SELECT count(*) FROM entries") == "3")
        #expect(await daemon.stop(SIGKILL) == 128 + SIGKILL)

        // The lost writes: each file keeps its size, its content is gone.
        for target in targets {
            let path = scratch.path + "/imgd-data/cache/" + (try ImageURL(server.url(target)).cacheKey.relativePath)
            let size = try #require(FileManager.default.attributesOfItem(atPath: path)[.size] as? Int)
            try Data(count: size).write(to: URL(fileURLWithPath: path))
            #expect(FileManager.default.contents(atPath: path) == Data(count: size))
        }
        #expect(try await sqlite(index, "SELECT count(*) FROM entries") == "3")

        daemon = try await DaemonProcess.start(in: scratch.path)
        #expect(daemon.log.contains("did not stop cleanly"))

        // get: not a hit with the zeros, but fetched again and served whole.
        let fresh = try await daemon.result(#"{"cmd":"get","url":"\#(server.url(inPlace))","data":true}"#)
        #expect(fresh["source"] as? String == "network")
        let data = try #require(Data(base64Encoded: fresh["data"] as? String ?? ""))
        #expect(Array(data) == TestHTTPServer.body(for: inPlace))
        #expect(server.requestCount(inPlace) == 2)
        #expect(try cachedBytes(scratch, server.url(inPlace)) == TestHTTPServer.body(for: inPlace))

        // get without fetch: a miss, and the bad entry is gone (row and file), not left for later.
        let miss = try await daemon.call(#"{"cmd":"get","url":"\#(server.url(spilled))","fetch":false}"#)
        #expect(miss["ok"] as? Bool == false)
        #expect((miss["error"] as? [String: Any])?["code"] as? String == "not_found", "reply: \(miss)")
        let spilledKey = try ImageURL(server.url(spilled)).cacheKey
        #expect(!FileManager.default.fileExists(atPath: scratch.path + "/imgd-data/cache/" + spilledKey.relativePath))
        let spilledRows = try await sqlite(index, "SELECT count(*) FROM entries WHERE hex(key) = '\(spilledKey.hex.uppercased())'")
        #expect(spilledRows == "0")
        #expect(server.requestCount(spilled) == 1)
        let refetched = try await daemon.result(#"{"cmd":"get","url":"\#(server.url(spilled))"}"#)
        #expect(refetched["source"] as? String == "network")
        #expect(server.requestCount(spilled) == 2)
        #expect(try cachedBytes(scratch, server.url(spilled)) == TestHTTPServer.body(for: spilled))

        // A list: the URL counts as fetched for it, not as already cached.
        try daemon.drop("after-power-cut.txt", server.url(listed) + "\n")
        let list = try #require(await daemon.finishedList("after-power-cut.txt"), "log: \(daemon.log)")
        #expect(list["state"] as? String == "done")
        #expect(list["cached"] as? Int == 1)
        #expect(list["already_cached"] as? Int == 0)
        #expect(server.requestCount(listed) == 2)
        #expect(try cachedBytes(scratch, server.url(listed)) == TestHTTPServer.body(for: listed))

        // Nothing bad is left: a full check of the running cache finds every entry whole.
        let check = try await daemon.result(#"{"cmd":"fsck"}"#)
        #expect(check["checked"] as? Int == 3)
        #expect(check["bad"] as? Int == 0)
        #expect(await daemon.stop() == 0)
        try await server.shutdown()
    }
}
