import Foundation
import ImgdTestSupport
import Testing

/// `systemd/imgd-ready.service`, checked with systemd's own tools like the other units
/// (``SystemdUnitTests``): it verifies clean beside imgd.service and imgd.socket, running the
/// built imgctl; its exposure stays at or below 2.0; it waits with `imgctl wait-ready` as a
/// oneshot that stays active, ordered after and requiring imgd.service, as user imgd.
@Suite("systemd unit imgd-ready.service", .timeLimit(.minutes(5)), .offThePool)
struct ReadyUnitTests {
    @Test("systemd-analyze verify: imgd-ready.service with imgd.service and imgd.socket, running the built binaries, reports nothing about them")
    func verify() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        func quoted(_ path: String) -> String { "\"" + path.replacingOccurrences(of: "%", with: "%%") + "\"" }
        let service = try SystemdUnitTests.text("imgd.service")
            .replacingOccurrences(of: "\nExecStart=/usr/bin/imgd ", with: "\nExecStart=\(quoted(BinaryRunner.imgdPath)) ")
            .replacingOccurrences(of: "\nExecReload=/usr/bin/imgctl ", with: "\nExecReload=\(quoted(BinaryRunner.imgctlPath)) ")
        let shipped = try SystemdUnitTests.text("imgd-ready.service")
        let ready = shipped.replacingOccurrences(
            of: "\nExecStart=/usr/bin/imgctl wait-ready ", with: "\nExecStart=\(quoted(BinaryRunner.imgctlPath)) wait-ready ")
        #expect(ready != shipped, "imgd-ready.service has no 'ExecStart=/usr/bin/imgctl wait-ready ' line")
        try scratch.write("imgd.service", service)
        try scratch.write("imgd.socket", try SystemdUnitTests.text("imgd.socket"))
        try scratch.write("imgd-ready.service", ready)
        let run = try await SystemdTool.run(
            "systemd-analyze",
            ["verify", "--no-pager", scratch.path + "/imgd-ready.service", scratch.path + "/imgd.service", scratch.path + "/imgd.socket"])
        guard let run else { return }
        #expect(run.status == 0, "systemd-analyze verify failed:\n\(run.text)")
        let ours = run.lines.filter { $0.contains("imgd") }
        #expect(ours.isEmpty, "systemd-analyze verify reported:\n\(ours.joined(separator: "\n"))")
    }

    @Test("systemd-analyze security --offline=yes: exposure of imgd-ready.service at most 2.0")
    func exposure() async throws {
        let run = try await SystemdTool.run(
            "systemd-analyze", ["security", "--offline=yes", "--no-pager", SystemdUnitTests.unitFolder + "/imgd-ready.service"])
        guard let run else { return }
        let marker = "Overall exposure level for imgd-ready.service:"
        let figure = run.lines.first { $0.contains(marker) }
            .flatMap { line in line.components(separatedBy: marker).last?.split(separator: " ").first }
            .flatMap { Double($0) }
        let exposure = try #require(figure, "no '\(marker) N.N' line in:\n\(run.text)")
        #expect(exposure <= 2.0, "exposure \(exposure) is above 2.0:\n\(run.text)")
    }

    @Test("the unit's ExecStart, pointed at a running imgd without ready-lists, is accepted by imgctl and exits 0")
    func execStartRuns() async throws {
        let unit = try UnitFile(parsing: try SystemdUnitTests.text("imgd-ready.service"))
        let line = try #require(unit.values("Service", "ExecStart").first)
        var words = line.split(separator: " ").map(String.init)
        #expect(words.first == "/usr/bin/imgctl")
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let daemon = try await DaemonProcess.start(in: scratch.path)
        defer { daemon.killIfRunning() }
        let socket = try #require(words.firstIndex(of: "--socket"))
        words[socket + 1] = daemon.socket
        let run = try await BinaryRunner.imgctl(Array(words.dropFirst()), in: scratch.path)
        #expect(run.status == 0, "\(line): \(run.stderr)")
        #expect(await daemon.stop() == 0)
    }

    @Test("a oneshot that stays active, after and requiring imgd.service, waiting with imgctl wait-ready as user imgd, within its start timeout")
    func directives() throws {
        let unit = try UnitFile(parsing: try SystemdUnitTests.text("imgd-ready.service"))
        #expect(unit.values("Unit", "Requires") == ["imgd.service"])
        #expect(unit.values("Unit", "After") == ["imgd.service"])
        #expect(unit.values("Service", "Type") == ["oneshot"])
        #expect(unit.values("Service", "RemainAfterExit") == ["yes"])
        #expect(unit.values("Service", "ExecStart") == ["/usr/bin/imgctl wait-ready --socket /run/imgd/imgd.sock --timeout 30m"])
        #expect(unit.values("Service", "TimeoutStartSec") == ["31min"])
        #expect(unit.values("Service", "User") == ["imgd"] && unit.values("Service", "Group") == ["imgd"])
        #expect(unit.values("Install", "WantedBy") == ["multi-user.target"])
    }
}
