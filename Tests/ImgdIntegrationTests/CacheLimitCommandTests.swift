import Foundation
import ImgdCore
import ImgdTestSupport
import Testing

/// `--disk-limit` and `--max-age` through the real binary.
@Suite("imgd prefetch cache limits (the binary)", .timeLimit(.minutes(10)), .offThePool)
struct CacheLimitCommandTests {
    /// Total size of the cache's image files.
    private func imageBytes(_ scratch: ScratchFolder, _ folder: String) throws -> Int {
        try scratch.files(under: folder).reduce(0) { total, path in
            let attributes = try FileManager.default.attributesOfItem(atPath: scratch.path + "/" + folder + "/" + path)
            return total + ((attributes[.size] as? NSNumber)?.intValue ?? 0)
        }
    }

    @Test("--disk-limit holds during a run, and a lowered limit is enforced at the next start")
    func diskLimit() async throws {
        let server = try await TestHTTPServer.start()
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        // Sizes at the daemon's scale (prefetch takes its minimum disk-limit, 1 MiB), each body
        // under 256 KiB so that its reservation is its size, as 20 KB bodies were under 100 KB.
        try scratch.write("list.txt", (0..<16).map { server.url("/img/l\($0).png?bytes=200000") }.joined(separator: "\n"))
        let run = try await BinaryRunner.imgd(
            ["prefetch", "list.txt", "--cache", "c", "--disk-limit", "2MiB", "--max-parallel", "2"], in: scratch.path)
        #expect(run.status == 0, "stderr: \(run.stderr)")
        #expect(try imageBytes(scratch, "c") <= 2 << 20)
        #expect(scratch.files(under: "c").count == 10)

        try scratch.write("empty.txt", "")
        let lowered = try await BinaryRunner.imgd(["prefetch", "empty.txt", "--cache", "c", "--disk-limit", "1MiB"], in: scratch.path)
        #expect(lowered.status == 0)
        #expect(lowered.stderr.contains("over its 1 MiB limit: evicted 6 entries"), "\(lowered.stderr)")
        #expect(try imageBytes(scratch, "c") <= (1 << 20) * 9 / 10, "down to the 90% low-water mark")
        try await server.shutdown()
    }

    @Test("--max-age removes entries idle for longer at start; recent ones stay")
    func maxAge() async throws {
        let server = try await TestHTTPServer.start()
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let old = server.url("/img/old.png"), fresh = server.url("/img/fresh.png")
        try scratch.write("list.txt", [old, fresh].joined(separator: "\n"))
        let warm = try await BinaryRunner.imgd(["prefetch", "list.txt", "--cache", "c"], in: scratch.path)
        #expect(warm.status == 0)
        // Age one entry by two days, as the index records it (wall-clock milliseconds).
        let key = try ImageURL(old).cacheKey.hex.uppercased()
        let twoDaysAgo = WallClock.nowMilliseconds() - 2 * 86_400_000
        let sql = "UPDATE entries SET last_access = \(twoDaysAgo) WHERE key = X'\(key)';"
        let update = try await ChildProcess.run("/usr/bin/sqlite3", [scratch.path + "/c/index.sqlite", sql])
        #expect(update.status == 0, "\(update.stderr)")

        try scratch.write("empty.txt", "")
        let aged = try await BinaryRunner.imgd(["prefetch", "empty.txt", "--cache", "c", "--max-age", "1d"], in: scratch.path)
        #expect(aged.status == 0)
        #expect(aged.stderr.contains("removed 1 entries"))
        #expect(scratch.files(under: "c") == [try ImageURL(fresh).cacheKey.relativePath])
        try await server.shutdown()
    }

    @Test("bad sizes and durations are usage errors", arguments: [["--disk-limit", "12q"], ["--max-age", "soon"], ["--max-body-bytes", "-5MB"]])
    func badUnits(arguments: [String]) async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let result = try await BinaryRunner.imgd(["prefetch", "l.txt"] + arguments, in: scratch.path)
        #expect(result.status == 2)
    }
}
