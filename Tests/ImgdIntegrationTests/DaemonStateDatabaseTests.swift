import Foundation
import ImgdCore
import ImgdTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The state database (the lists and their progress) failing under a running daemon: its
/// filesystem full, on a tmpfs of its own. Whatever the spool could not write it keeps and
/// writes once the database answers, a list it could not claim is claimed then: no list is lost,
/// none is left waiting until a restart, and the failure is logged once.
@Suite("State database failures (the real imgd)", .serialized, .timeLimit(.minutes(5)), .offThePool)
struct DaemonStateDatabaseTests {
    @Test("the state database's filesystem fills up while a list is warmed: logged once, nothing finished meanwhile; once there is room again the list finishes whole, and a restart leaves it done",
          .enabled(if: TmpfsMount.isAvailable, "needs root to mount a tmpfs"))
    func fullWhileWarming() async throws {
        let server = try await TestHTTPServer.start()
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let tmpfs = try TmpfsMount(bytes: 4 << 20)
        defer { tmpfs.unmount() }
        let state = ["--state", tmpfs.path + "/state"]
        let daemon = try await DaemonProcess.start(in: scratch.path, arguments: state)
        defer { daemon.killIfRunning() }
        let targets = (0..<20).map { "/img/full-\($0).png?gate=held" }
        try daemon.drop("warming.txt", targets.map(server.url).joined(separator: "\n") + "\n")
        // Claimed (its rows written, its file in .claimed/), its requests held at the server.
        #expect(await eventually(timeout: .seconds(30)) { server.requestCount(prefix: "/img/full-") > 0 }, "log:\n\(daemon.log)")

        let filler = try Self.fill(tmpfs.path + "/filler")
        server.openGate("held")
        let failure = "recording the progress of lists in the state database failed"
        #expect(await eventually(timeout: .seconds(30)) { daemon.log.contains(failure) }, "log:\n\(daemon.log)")
        // Every URL answered and its outcome kept in memory, none written: the list waits.
        #expect(await eventually(timeout: .seconds(30)) { server.requestCount(prefix: "/img/full-") == 20 })
        #expect(!FileManager.default.fileExists(atPath: daemon.spool + "/done/warming.txt"))
        #expect(Self.names(in: daemon.spool + "/.claimed").count == 1)

        unlink(filler)
        let list = try #require(await daemon.finishedList("warming.txt", timeout: .seconds(30)), "log:\n\(daemon.log)")
        #expect(list["state"] as? String == "done")
        #expect(list["cached"] as? Int == 20)
        #expect(list["failed"] as? Int == 0)
        #expect(list["pending"] as? Int == 0)
        let report = try #require(await daemon.report("warming.txt", in: "done"))
        #expect(report["cached"] as? Int == 20 && report["total"] as? Int == 20, "\(report)")
        #expect(await eventually(timeout: .seconds(10)) { daemon.log.contains("the state database answers again") }, "log:\n\(daemon.log)")
        // Once, however many times it was tried again while full.
        #expect(daemon.log.components(separatedBy: failure).count - 1 == 1, "log:\n\(daemon.log)")
        for target in targets { #expect(server.requestCount(target) == 1, "\(target)") }
        #expect(await daemon.stop() == 0)

        // A restart finds it done: not claimed again, not fetched again.
        let again = try await DaemonProcess.start(in: scratch.path, arguments: state)
        defer { again.killIfRunning() }
        #expect(try await again.list("warming.txt")?["state"] as? String == "done")
        #expect(Self.names(in: again.spool + "/.claimed").isEmpty)
        #expect(server.totalRequests == 20)
        #expect(await again.stop() == 0)
        try await server.shutdown()
    }

    @Test("a list dropped while the state database's filesystem is full stays in the spool, logged once, and is claimed and warmed once there is room",
          .enabled(if: TmpfsMount.isAvailable, "needs root to mount a tmpfs"))
    func fullWhenDropped() async throws {
        let server = try await TestHTTPServer.start()
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let tmpfs = try TmpfsMount(bytes: 4 << 20)
        defer { tmpfs.unmount() }
        let daemon = try await DaemonProcess.start(in: scratch.path, arguments: ["--state", tmpfs.path + "/state"])
        defer { daemon.killIfRunning() }
        let filler = try Self.fill(tmpfs.path + "/filler")
        // Enough lines that recording them needs pages the full filesystem cannot give.
        let targets = (0..<300).map { "/img/late-\($0).png?w=4&h=4" }
        try daemon.drop("late.txt", targets.map(server.url).joined(separator: "\n") + "\n")
        let failure = "cannot record the list in the state database, leaving it in the spool and trying again"
        #expect(await eventually(timeout: .seconds(30)) { daemon.log.contains(failure) }, "log:\n\(daemon.log)")
        #expect(daemon.spoolNames().contains("late.txt"))
        #expect(server.totalRequests == 0)

        unlink(filler)
        let list = try #require(await daemon.finishedList("late.txt", timeout: .seconds(60)), "log:\n\(daemon.log)")
        #expect(list["state"] as? String == "done")
        #expect(list["total"] as? Int == 300 && list["cached"] as? Int == 300, "\(list)")
        #expect(!daemon.spoolNames().contains("late.txt"))
        #expect(daemon.log.components(separatedBy: failure).count - 1 == 1, "log:\n\(daemon.log)")
        #expect(await daemon.stop() == 0)
        try await server.shutdown()
    }

    // MARK: - Support

    /// Writes `path` until the filesystem is full; returns the path.
    private static func fill(_ path: String) throws -> String {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        defer { close(fd) }
        let chunk = [UInt8](repeating: 0x5a, count: 16 * 1024)
        while true {
            let written = chunk.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            if written < 0 && errno == EINTR { continue }
            if written < 0 && errno == ENOSPC { break }
            guard written > 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        }
        // The last partial chunk's bytes too, down to the last free page.
        var byte: UInt8 = 0
        while write(fd, &byte, 1) == 1 {}
        return path
    }

    private static func names(in folder: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []).sorted()
    }
}
