import Foundation
import ImgdCore
import ImgdTestSupport
import Testing

@Suite("Crash safety of the cache folder", .timeLimit(.minutes(10)), .offThePool)
struct CrashSafetyTests {
    @Test("kill -9 mid-download: no partial file under a final name; the next run clears tmp/ and completes")
    func killMidDownload() async throws {
        let server = try await TestHTTPServer.start()
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let complete = (0..<5).map { "/img/done\($0).png?w=30&h=30" }
        // A large body that stalls after 200 KB (past the in-memory buffer): it is mid-write
        // in its temp file when the process dies.
        let stalled = "/img/stuck.png?w=400&h=400&stall_after=200000"
        try scratch.write("list.txt", (complete + [stalled]).map(server.url).joined(separator: "\n"))

        let process = try BinaryRunner.launch(["prefetch", "list.txt", "--cache", "c"], in: scratch.path)
        let cacheRoot = scratch.path + "/c"
        let finished = await eventually(timeout: .seconds(20)) {
            scratch.files(under: "c").count == complete.count && server.inFlight == 1
        }
        #expect(finished)
        // An image is reported cached once its row is committed, in a batch a little after its
        // file is in place: the five must survive the kill from then on.
        let recorded = await eventually(timeout: .seconds(10)) {
            let count = try await ChildProcess.run("/usr/bin/sqlite3", [cacheRoot + "/index.sqlite", "SELECT count(*) FROM entries"])
            return count.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "\(complete.count)"
        }
        #expect(recorded)
        // The stalled body has reached its temp file.
        #expect(await eventually { ((try? FileManager.default.contentsOfDirectory(atPath: cacheRoot + "/tmp")) ?? []).count == 1 })
        process.signal(SIGKILL)
        #expect(await process.exited(within: .seconds(30)) != nil, "a SIGKILLed imgd did not exit")

        let stuckKey = try ImageURL(server.url(stalled)).cacheKey
        #expect(!FileManager.default.fileExists(atPath: cacheRoot + "/" + stuckKey.relativePath))
        for target in complete {
            let key = try ImageURL(server.url(target)).cacheKey
            #expect(Array(try Data(contentsOf: URL(fileURLWithPath: cacheRoot + "/" + key.relativePath))) == TestHTTPServer.body(for: target))
        }

        try scratch.write("rest.txt", complete.map(server.url).joined(separator: "\n"))
        let rerun = try await BinaryRunner.imgd(["prefetch", "rest.txt", "--cache", "c"], in: scratch.path)
        #expect(rerun.status == 0)
        #expect(rerun.stdout.contains("5 already cached"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: cacheRoot + "/tmp").isEmpty)
        try await server.shutdown()
    }
}
