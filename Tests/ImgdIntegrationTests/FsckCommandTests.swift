import Foundation
import ImgdCore
import ImgdTestSupport
import Testing

/// `imgd fsck` on a real cache filled by `imgd prefetch`, then damaged by hand.
@Suite("imgd fsck (the binary)", .timeLimit(.minutes(10)), .offThePool)
struct FsckCommandTests {
    @Test("a clean cache checks clean; damaged, missing and orphan files are found and removed")
    func findsAndRemoves() async throws {
        let server = try await TestHTTPServer.start()
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let targets = (0..<6).map { "/img/f\($0).png?w=12&h=12" }
        try scratch.write("list.txt", targets.map(server.url).joined(separator: "\n"))
        let warm = try await BinaryRunner.imgd(["prefetch", "list.txt", "--cache", "c"], in: scratch.path)
        #expect(warm.status == 0)

        let clean = try await BinaryRunner.imgd(["fsck", "--cache", "c"], in: scratch.path)
        #expect(clean.status == 0)
        #expect(clean.stdout.contains("checked 6 entries: 0 bad, 0 removed; 0 files without an entry removed"))

        func path(_ target: String) throws -> String {
            scratch.path + "/c/" + (try ImageURL(server.url(target)).cacheKey.relativePath)
        }
        // Same size, one byte changed; shortened; deleted; and a stray file with no entry.
        var bytes = try Array(Data(contentsOf: URL(fileURLWithPath: path(targets[0]))))
        bytes[bytes.count / 2] ^= 0xFF
        try Data(bytes).write(to: URL(fileURLWithPath: path(targets[0])))
        try Data(bytes.prefix(10)).write(to: URL(fileURLWithPath: path(targets[1])))
        try FileManager.default.removeItem(atPath: path(targets[2]))
        let stray = scratch.path + "/c/ab/" + String(repeating: "ab", count: 32)
        try Data("stray".utf8).write(to: URL(fileURLWithPath: stray))

        let damaged = try await BinaryRunner.imgd(["fsck", "--cache", "c"], in: scratch.path)
        #expect(damaged.status == 1)
        #expect(damaged.stdout.contains("checked 6 entries: 3 bad, 3 removed; 1 files without an entry removed"))
        #expect(damaged.stderr.contains("\(server.url(targets[0])): content does not match its SHA-256"))
        #expect(damaged.stderr.contains("\(server.url(targets[1])): size 10 bytes"))
        #expect(damaged.stderr.contains("\(server.url(targets[2])): file missing"))
        #expect(!FileManager.default.fileExists(atPath: stray))
        #expect(scratch.files(under: "c").count == 3)

        let after = try await BinaryRunner.imgd(["fsck", "--cache", "c"], in: scratch.path)
        #expect(after.status == 0)
        #expect(after.stdout.contains("checked 3 entries: 0 bad"))
        // The removed entries are fetched again on the next warm-up.
        let rewarm = try await BinaryRunner.imgd(["prefetch", "list.txt", "--cache", "c"], in: scratch.path)
        #expect(rewarm.stdout.contains("3 downloaded"))
        #expect(rewarm.stdout.contains("3 already cached"))
        try await server.shutdown()
    }
}
