import Foundation
import ImgdTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The courtesy loop in the real `imgd`: a stand-in PSI file for exact steps (halved over the
/// threshold, one more at a time under it, on-demand gets exempt, off by a reload), and real
/// pressure from CPU hogs on this machine's cores.
@Suite("Courtesy to the host (the real imgd)", .offThePool)
struct CourtesyDaemonTests {
    static func psi(_ avg10: Double) -> String {
        "some avg10=\(avg10) avg60=0.00 avg300=0.00 total=1\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
    }

    static func courtesy(_ daemon: DaemonProcess) async throws -> [String: Any] {
        try await daemon.result(#"{"cmd":"status"}"#)["courtesy"] as? [String: Any] ?? [:]
    }

    @Test("over the threshold prefetching is halved and new list transfers stay under the cap while an on-demand get goes past it; under it the cap climbs back to max-parallel; courtesy = false lifts it at once")
    func standInPressure() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        try await withRunningServer { server in
            let pressure = scratch.path + "/cpu.pressure"
            try scratch.write("cpu.pressure", Self.psi(0))
            let config = scratch.path + "/imgd.toml"
            try scratch.write("imgd.toml", "max-parallel = 8\nmax-per-host = 16\ncourtesy = true\ncourtesy-pressure = [\"\(pressure)\"]\n")
            // A courtesy flag of its own keeps the harness from turning the loop off; the file
            // turns it on (and off again, by a reload, below).
            let daemon = try await DaemonProcess.start(in: scratch.path, arguments: ["--config", config, "--courtesy-threshold", "20%"])
            defer { daemon.killIfRunning() }
            // The loop's first reading comes once the service group runs, just after the socket answers.
            var first: [String: Any] = [:]
            #expect(await eventually(timeout: .seconds(10)) {
                first = (try? await Self.courtesy(daemon)) ?? [:]
                return !((first["files"] as? [Any]) ?? []).isEmpty
            })
            #expect(first["enabled"] as? Bool == true && first["cap"] as? Int == 8 && first["threshold"] as? Double == 20)
            #expect((first["files"] as? [[String: Any]])?.first?["path"] as? String == pressure, "\(first)")
            // Eight held on gate a fill the slots; twelve wait on gate b.
            let urls = (1...8).map { server.url("/img/a\($0).png?gate=a") } + (1...12).map { server.url("/img/b\($0).png?gate=b") }
            try daemon.drop("warm.txt", urls.joined(separator: "\n") + "\n")
            #expect(await server.waitForInFlight(atLeast: 8, timeout: .seconds(10)))
            try scratch.write("cpu.pressure", Self.psi(90))
            #expect(await eventually(timeout: .seconds(10)) { (try? await Self.courtesy(daemon))?["limit"] as? Int == 4 })
            let over = try await Self.courtesy(daemon)
            #expect(over["stall"] as? Double == 90 && (over["reason"] as? String ?? "").contains("prefetching 4 at once of 8"), "\(over)")
            // Running transfers are not cut; once they end, at most 4 list transfers run.
            #expect(server.inFlight == 8)
            server.openGate("a")
            #expect(await eventually(timeout: .seconds(10)) { (try? await daemon.list("warm.txt"))?["cached"] as? Int == 8 })
            #expect(await eventually(timeout: .seconds(10)) { server.requestCount(prefix: "/img/b") == 4 })
            #expect(await !eventually(timeout: .seconds(1)) { server.inFlight > 4 }, "the courtesy cap was not applied: \(server.inFlight)")
            // An on-demand get is not held by it.
            let getURL = server.url("/img/c1.png?gate=c")
            let get = Task { (try? await daemon.call(#"{"cmd":"get","url":"\#(getURL)"}"#))?["ok"] as? Bool == true }
            #expect(await server.waitForInFlight(atLeast: 5, timeout: .seconds(10)), "the get waited behind the courtesy cap")
            // Under the threshold: back up by one a reading, to max-parallel.
            try scratch.write("cpu.pressure", Self.psi(1))
            #expect(await eventually(timeout: .seconds(30)) { (try? await Self.courtesy(daemon))?["limit"] as? Int == 8 })
            // Max-parallel counts the get too: seven list transfers beside it.
            #expect(await eventually(timeout: .seconds(10)) { server.requestCount(prefix: "/img/b") == 7 && server.inFlight == 8 })
            // Pressure again, then courtesy turned off by a reload: the cap goes at once.
            try scratch.write("cpu.pressure", Self.psi(95))
            #expect(await eventually(timeout: .seconds(10)) { (try? await Self.courtesy(daemon))?["limit"] as? Int == 4 })
            try scratch.write("imgd.toml", "max-parallel = 8\nmax-per-host = 16\ncourtesy = false\ncourtesy-pressure = [\"\(pressure)\"]\n")
            _ = try await daemon.result(#"{"cmd":"reload"}"#)
            let off = try await Self.courtesy(daemon)
            #expect(off["enabled"] as? Bool == false && off["limit"] as? Int == 8, "\(off)")
            server.openGate("b")
            server.openGate("c")
            #expect(await get.value)
            #expect(await daemon.finishedList("warm.txt")?["state"] as? String == "done")
            #expect(await daemon.stop() == 0)
        }
    }

    @Test("a pressure file that cannot be read leaves the cap alone and says so")
    func unreadable() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let missing = scratch.path + "/gone.pressure"
        let daemon = try await DaemonProcess.start(in: scratch.path, arguments: ["--courtesy", "true", "--courtesy-pressure", missing])
        defer { daemon.killIfRunning() }
        #expect(await eventually(timeout: .seconds(10)) {
            ((try? await Self.courtesy(daemon))?["reason"] as? String ?? "").contains("no pressure file could be read")
        })
        let status = try await Self.courtesy(daemon)
        #expect(status["limit"] as? Int == 8 && status["stall"] is NSNull, "\(status)")
        #expect(await daemon.stop() == 0)
    }

    @Test("real pressure: CPU hogs on every core raise the stall share imgd reads past the threshold, and it lowers its prefetch cap")
    func realPressure() async throws {
        // Not on a kernel without PSI (the default files are then unreadable).
        guard access("/proc/pressure/cpu", R_OK) == 0 else { return }
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        let daemon = try await DaemonProcess.start(in: scratch.path, arguments: ["--courtesy", "true", "--max-parallel", "16"])
        defer { daemon.killIfRunning() }
        // Two hogs per core, at the lowest priority: they stall each other (PSI counts a task
        // that waits for a CPU), while the other tests running beside this one hardly notice them.
        let cores = max(1, sysconf(Int32(_SC_NPROCESSORS_ONLN)))
        var hogs: [ChildProcess] = []
        defer { for hog in hogs where hog.isRunning { hog.signal(SIGKILL) } }
        for _ in 0..<(2 * cores) {
            hogs.append(try ChildProcess("/usr/bin/nice", ["-n", "19", "/bin/sh", "-c", "while :; do :; done"]))
        }
        var seen: [String: Any] = [:]
        let lowered = await eventually(timeout: .seconds(40)) {
            seen = (try? await Self.courtesy(daemon)) ?? [:]
            return (seen["stall"] as? Double ?? 0) > 20 && (seen["limit"] as? Int ?? 16) < 16
        }
        #expect(lowered, "\(seen)")
        let files = (seen["files"] as? [[String: Any]])?.compactMap { $0["path"] as? String } ?? []
        #expect(files.contains { $0.hasSuffix("cpu.pressure") || $0 == "/proc/pressure/cpu" }, "\(files)")
        for hog in hogs { hog.signal(SIGKILL) }
        #expect(await daemon.stop() == 0)
    }
}
