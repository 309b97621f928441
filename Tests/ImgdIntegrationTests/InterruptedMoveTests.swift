import Foundation
import ImgdTestSupport
import Testing

/// A list's file moves twice: from the spool to `.claimed/` when it is claimed, and from there to
/// `done/` or `failed/` when it finishes, each time by a link and an unlink, with database writes
/// and the report around them. A SIGKILL can land between any two of these steps. The crash
/// loop (bench/crash-loop.sh) hits such windows by chance; these tests build the state a kill
/// leaves in each one by hand — the daemon is killed, then the files and the state database are
/// put back as they were at that moment — and restart the daemon on it.
@Suite("Kills between a list's moves", .timeLimit(.minutes(3)), .offThePool)
struct InterruptedMoveTests {
    @Test("a restart after a kill inside a list's moves reports each list once, beside its own file: no report replaced, no second copy, no refusal")
    func restartAfterInterruptedMoves() async throws {
        let server = try await TestHTTPServer.start()
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        var daemon = try await DaemonProcess.start(in: scratch.path)
        let spool = daemon.spool
        // x.txt twice (the second one finishes as x.2.txt: the name is taken in done/), z.txt, w.txt.
        try daemon.drop("x.txt", server.url("/img/x1.png") + "\n")
        let firstReport = try #require(await daemon.report("x.txt", in: "done"), "log: \(daemon.log)")
        #expect(firstReport["total"] as? Int == 1)
        try daemon.drop("x.txt", [server.url("/img/x2.png"), server.url("/img/x3.png")].joined(separator: "\n"))
        #expect(await daemon.report("x.2.txt", in: "done")?["total"] as? Int == 2)
        try daemon.drop("z.txt", server.url("/img/z.png") + "\n")
        try daemon.drop("w.txt", server.url("/img/w.png") + "\n")
        #expect(await daemon.report("z.txt", in: "done") != nil)
        #expect(await daemon.report("w.txt", in: "done") != nil)
        #expect(await daemon.stop(SIGKILL) == 128 + SIGKILL)

        let state = scratch.path + "/imgd-data/state/imgd-state.sqlite"
        let fm = FileManager.default
        func claimedFile(_ finished: String) async throws -> String {
            try await sqlite(state, "SELECT claimed_file FROM lists WHERE finished_file = '\(finished)'")
        }
        // The second x.txt: killed after its file moved to done/x.2.txt (the name recorded first),
        // before its report was written.
        _ = try await sqlite(state, "UPDATE lists SET state = 'active', finished_at = NULL WHERE finished_file = 'x.2.txt'")
        try fm.removeItem(atPath: spool + "/done/x.2.txt.report.json")
        // z.txt: killed between the link into done/ and the unlink from .claimed/.
        let zClaimed = try await claimedFile("z.txt")
        #expect(!zClaimed.isEmpty)
        _ = try await sqlite(state, "UPDATE lists SET state = 'active', finished_at = NULL WHERE finished_file = 'z.txt'")
        try fm.removeItem(atPath: spool + "/done/z.txt.report.json")
        try fm.linkItem(atPath: spool + "/done/z.txt", toPath: spool + "/.claimed/" + zClaimed)
        // w.txt: killed while claimed, between the link into .claimed/ and the unlink from the spool.
        let wClaimed = try await claimedFile("w.txt")
        #expect(!wClaimed.isEmpty)
        _ = try await sqlite(state, "UPDATE lists SET state = 'claiming', finished_at = NULL, finished_file = NULL WHERE claimed_file = '\(wClaimed)'")
        try fm.removeItem(atPath: spool + "/done/w.txt.report.json")
        try fm.moveItem(atPath: spool + "/done/w.txt", toPath: spool + "/.claimed/" + wClaimed)
        try fm.linkItem(atPath: spool + "/.claimed/" + wClaimed, toPath: spool + "/w.txt")

        daemon = try await DaemonProcess.start(in: scratch.path)
        // A list dropped now is claimed after whatever the start found in the spool (one claim at
        // a time, in order): once it is done, a refusal of w.txt's name would have been made.
        try daemon.drop("last.txt", server.url("/img/last.png") + "\n")
        #expect(await daemon.report("last.txt", in: "done") != nil, "log: \(daemon.log)")
        let second = await daemon.report("x.2.txt", in: "done")
        #expect(second?["total"] as? Int == 2, "log: \(daemon.log)")
        #expect(await daemon.report("z.txt", in: "done")?["total"] as? Int == 1)
        #expect(await daemon.report("w.txt", in: "done")?["state"] as? String == "done")
        // The first x.txt's report is its own still.
        let first = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: spool + "/done/x.txt.report.json"))) as? [String: Any]
        #expect(first?["total"] as? Int == 1)
        let done = try fm.contentsOfDirectory(atPath: spool + "/done").sorted()
        #expect(done == [
            "last.txt", "last.txt.report.json", "w.txt", "w.txt.report.json", "x.2.txt", "x.2.txt.report.json",
            "x.txt", "x.txt.report.json", "z.txt", "z.txt.report.json",
        ])
        #expect(try fm.contentsOfDirectory(atPath: spool + "/failed").isEmpty)
        #expect(try fm.contentsOfDirectory(atPath: spool + "/.claimed").isEmpty)
        #expect(!daemon.spoolNames().contains("w.txt"))
        // A list's report is written just before its state is saved as done: wait for the state.
        var lists: [[String: Any]] = []
        let allDone = await eventually(timeout: .seconds(30)) {
            lists = try await daemon.lists()
            return lists.count == 5 && lists.allSatisfy { $0["state"] as? String == "done" }
        }
        #expect(allDone, "lists: \(lists)")
        #expect(await daemon.stop() == 0)
        try await server.shutdown()
    }
}
