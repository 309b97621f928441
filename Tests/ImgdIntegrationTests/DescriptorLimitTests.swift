import Foundation
import ImgdTestSupport
import Testing

/// `max-connections` against `RLIMIT_NOFILE` (Protocol.md, *Limits*): the daemon raises its soft
/// limit to the hard one and refuses to start with a setting the hard limit cannot serve. The
/// real binary, started under util-linux's `prlimit`.
@Suite(
    "Descriptor limit: max-connections is checked against RLIMIT_NOFILE at start",
    .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/prlimit"), "needs util-linux's prlimit"),
    .timeLimit(.minutes(10)), .offThePool)
struct DescriptorLimitTests {
    @Test("a hard limit of 256 and max-connections 1000: exit 1 with an error naming the numbers and the fix")
    func refused() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let run = try await ChildProcess.run(
            "/usr/bin/prlimit", ["--nofile=256:256", BinaryRunner.imgdPath, "--max-connections", "1000"], in: scratch.path,
            timeout: .seconds(30))
        #expect(run.status == 1, "exit \(run.status): \(run.stderr)")
        #expect(run.stderr.contains("max-connections 1000 needs"), "\(run.stderr)")
        #expect(run.stderr.contains("the limit is 256 (RLIMIT_NOFILE"), "\(run.stderr)")
        #expect(run.stderr.contains("lower max-connections to at most"), "\(run.stderr)")
        #expect(!FileManager.default.fileExists(atPath: scratch.path + "/imgd-data/imgd.sock"), "it listened anyway")
    }

    @Test("a hard limit of 100, below what the daemon needs without any connection: the error says to raise the limit, never 'at most 0'")
    func tooLowForAnyConnection() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let run = try await ChildProcess.run(
            "/usr/bin/prlimit", ["--nofile=100:100", BinaryRunner.imgdPath], in: scratch.path, timeout: .seconds(30))
        #expect(run.status == 1, "exit \(run.status): \(run.stderr)")
        #expect(run.stderr.contains("the limit is 100 (RLIMIT_NOFILE"), "\(run.stderr)")
        #expect(!run.stderr.contains("at most 0") && !run.stderr.contains("at most -"), "\(run.stderr)")
        #expect(!run.stderr.contains("lower max-connections"), "\(run.stderr)")
        #expect(run.stderr.contains("no max-connections fits: raise the limit to at least"), "\(run.stderr)")
        #expect(run.stderr.contains("LimitNOFILE="), "\(run.stderr)")
    }

    @Test("a soft limit of 128 under a hard limit of 1024 and max-connections 500: raised to 1024, and it serves")
    func raisedAndServing() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let daemon = try await DaemonProcess.start(
            in: scratch.path, arguments: ["--max-connections", "500"], launcher: ["/usr/bin/prlimit", "--nofile=128:1024"])
        let limits = try String(contentsOfFile: "/proc/\(daemon.pid)/limits", encoding: .utf8)
        let line = limits.split(separator: "\n").first { $0.hasPrefix("Max open files") }.map(String.init) ?? ""
        #expect(line.split(separator: " ").filter { !$0.isEmpty }.dropFirst(3).prefix(2) == ["1024", "1024"], "\(line)")
        _ = try await daemon.result(#"{"cmd":"status"}"#)
        #expect(await daemon.stop() == 0, "log:\n\(daemon.log)")
    }
}
