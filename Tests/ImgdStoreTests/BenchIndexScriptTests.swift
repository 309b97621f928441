import Foundation
import ImgdCore
import ImgdStore
import ImgdTestSupport
import Testing

/// `bench/make_index.py` writes an index for the start-up benchmark with its own copy of
/// CacheIndex's schema; this keeps the copy in step with the code.
@Suite("bench/make_index.py against CacheIndex's schema", .offThePool)
struct BenchIndexScriptTests {
    static let python = "/usr/bin/python3"

    static let script = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("bench/make_index.py").path

    /// The CREATE statements of the SQLite file at `path` (tables, indexes, triggers), each with
    /// its whitespace collapsed, sorted by kind and name; read with python3's sqlite3.
    static func schema(of path: String) async throws -> [String] {
        let dump = """
            import sqlite3, sys
            rows = sqlite3.connect(sys.argv[1]).execute(
                "SELECT sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY type, name")
            for (sql,) in rows: print(" ".join(sql.split()))
            """
        let output = try await ChildProcess.run(python, ["-c", dump, path])
        try #require(output.status == 0, "\(output.stderr)")
        return output.stdout.split(separator: "\n").map(String.init)
    }

    @Test(
        "the script's index has exactly the tables, indexes and triggers CacheIndex creates, and CacheIndex reads its rows",
        .enabled(if: FileManager.default.isExecutableFile(atPath: python), "needs /usr/bin/python3 to run the script"))
    func sameSchema() async throws {
        let folder = try ScratchFolder("imgd-bench-index").path
        defer { try? FileManager.default.removeItem(atPath: folder) }

        let made = folder + "/made.sqlite"
        let run = try await ChildProcess.run(Self.python, [Self.script, "--out", made, "--entries", "50"])
        try #require(run.status == 0, "\(run.stderr)")
        let reference = folder + "/reference.sqlite"
        try CacheIndex(path: reference).close()

        let expected = try await Self.schema(of: reference)
        // entries, meta and totals; the two indexes; the three triggers that keep totals; and for
        // quotas per user, owner_totals, the owner index and its three triggers.
        #expect(expected.count == 13, "\(expected)")
        #expect(try await Self.schema(of: made) == expected)

        let index = try CacheIndex(path: made)
        defer { try? index.close() }
        #expect(index.previousShutdownWasClean)
        let sizes = (0..<50).map { 4096 + ($0 * 7919) % 36865 }
        let totals = try index.totals()
        #expect(totals.entries == 50)
        #expect(totals.bytes == sizes.reduce(0, +))
        let entry = try #require(try index.entry(for: CacheKey(url: ImageURL("http://bench.example/i/7.png"))))
        #expect(entry.bytes == sizes[7])
        #expect(entry.url == "http://bench.example/i/7.png")
    }
}
