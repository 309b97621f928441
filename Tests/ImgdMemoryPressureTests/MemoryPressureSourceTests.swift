import Foundation
import ImgdCore
import ImgdTestSupport
import Testing

@testable import ImgdMemoryPressure

@Suite("Memory pressure source", .offThePool)
struct MemoryPressureSourceTests {
    /// Resolves with every path pointed into `folder`, so the machine's own cgroup does not count.
    private func resolve(_ environment: [String: String], in folder: ScratchFolder) -> MemoryPressureSource {
        MemoryPressureSource.resolve(
            environment: environment,
            procSelfCgroup: folder.path + "/self-cgroup",
            cgroupRoot: folder.path + "/cgroup",
            procPressureMemory: folder.path + "/proc-pressure-memory")
    }

    @Test("MEMORY_PRESSURE_WATCH set to /dev/null or empty turns memory pressure off")
    func disabledBySystemd() throws {
        let folder = try ScratchFolder("imgd-psi")
        defer { folder.remove() }
        try folder.write("proc-pressure-memory", "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")
        #expect(resolve(["MEMORY_PRESSURE_WATCH": "/dev/null"], in: folder) == .disabled(reason: "MEMORY_PRESSURE_WATCH is /dev/null"))
        #expect(resolve(["MEMORY_PRESSURE_WATCH": ""], in: folder) == .disabled(reason: "MEMORY_PRESSURE_WATCH is empty"))
        #expect(
            resolve(["MEMORY_PRESSURE_WATCH": "/dev/null"], in: folder).description
                == "memory pressure: disabled (MEMORY_PRESSURE_WATCH is /dev/null)")
    }

    @Test("the watched path is used as what it is: a regular file, a FIFO or a socket, with the decoded bytes")
    func systemdKinds() throws {
        let folder = try ScratchFolder("imgd-psi")
        defer { folder.remove() }
        try folder.write("memory.pressure", "")
        #expect(mkfifo(folder.path + "/fifo", 0o600) == 0)
        let listener = TestSocket.bound(at: folder.path + "/socket")
        defer { close(listener) }
        let write = Data("some 150000 2000000".utf8).base64EncodedString()
        let bytes = Array("some 150000 2000000".utf8)

        #expect(
            resolve(["MEMORY_PRESSURE_WATCH": folder.path + "/memory.pressure", "MEMORY_PRESSURE_WRITE": write], in: folder)
                == .systemdWatch(path: folder.path + "/memory.pressure", kind: .psiFile, write: bytes))
        #expect(
            resolve(["MEMORY_PRESSURE_WATCH": folder.path + "/fifo"], in: folder)
                == .systemdWatch(path: folder.path + "/fifo", kind: .fifo, write: []))
        #expect(
            resolve(["MEMORY_PRESSURE_WATCH": folder.path + "/socket", "MEMORY_PRESSURE_WRITE": write], in: folder)
                == .systemdWatch(path: folder.path + "/socket", kind: .socket, write: bytes))
        #expect(
            MemoryPressureSource.systemdWatch(path: "/run/x", kind: .socket, write: bytes).description
                == "memory pressure: watching /run/x (socket from MEMORY_PRESSURE_WATCH, 19 bytes written)")
    }

    @Test("an unusable MEMORY_PRESSURE_WATCH turns memory pressure off and says why")
    func unusableWatch() throws {
        let folder = try ScratchFolder("imgd-psi")
        defer { folder.remove() }
        try folder.write("file", "")
        #expect(
            resolve(["MEMORY_PRESSURE_WATCH": folder.path + "/missing"], in: folder)
                == .disabled(reason: "MEMORY_PRESSURE_WATCH=\(folder.path)/missing: No such file or directory, ignoring it"))
        #expect(
            resolve(["MEMORY_PRESSURE_WATCH": folder.path], in: folder)
                == .disabled(reason: "MEMORY_PRESSURE_WATCH=\(folder.path) is not a PSI file, FIFO or socket, ignoring it"))
        #expect(
            resolve(["MEMORY_PRESSURE_WATCH": "memory.pressure"], in: folder)
                == .disabled(reason: "MEMORY_PRESSURE_WATCH=memory.pressure is not an absolute path, ignoring it"))
        let badWrite = MemoryPressureSource.disabled(
            reason: "MEMORY_PRESSURE_WRITE is not base64 of at most 4096 bytes, ignoring MEMORY_PRESSURE_WATCH")
        #expect(resolve(["MEMORY_PRESSURE_WATCH": folder.path + "/file", "MEMORY_PRESSURE_WRITE": "not base64!"], in: folder) == badWrite)
        // The length limit: 4096 decoded bytes pass, 4097 do not.
        let atLimit = Data(repeating: 65, count: 4096).base64EncodedString()
        let overLimit = Data(repeating: 65, count: 4097).base64EncodedString()
        #expect(
            resolve(["MEMORY_PRESSURE_WATCH": folder.path + "/file", "MEMORY_PRESSURE_WRITE": atLimit], in: folder)
                == .systemdWatch(path: folder.path + "/file", kind: .psiFile, write: Array(repeating: 65, count: 4096)))
        #expect(resolve(["MEMORY_PRESSURE_WATCH": folder.path + "/file", "MEMORY_PRESSURE_WRITE": overLimit], in: folder) == badWrite)
    }

    @Test("without systemd: the own cgroup's memory.pressure first, then /proc/pressure/memory, else off")
    func resolutionOrder() throws {
        let folder = try ScratchFolder("imgd-psi")
        defer { folder.remove() }
        let cgroup = folder.path + "/cgroup/system.slice/imgd.service"
        try FileManager.default.createDirectory(atPath: cgroup, withIntermediateDirectories: true)
        try folder.write("cgroup/system.slice/imgd.service/memory.pressure", "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")
        try folder.write("proc-pressure-memory", "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")
        // A hybrid system: cgroup v1 lines first, the v2 line last.
        try folder.write("self-cgroup", "4:memory:/system.slice/imgd.service\n1:name=systemd:/x\n0::/system.slice/imgd.service\n")
        #expect(resolve([:], in: folder) == .psiTrigger(path: cgroup + "/memory.pressure", trigger: "some 200000 2000000"))

        // The root cgroup (as on this machine) has no memory.pressure: system-wide PSI.
        try folder.write("self-cgroup", "0::/\n")
        let systemWide = MemoryPressureSource.psiTrigger(path: folder.path + "/proc-pressure-memory", trigger: "some 200000 2000000")
        #expect(resolve([:], in: folder) == systemWide)
        // A cgroup without the file, a v1-only system, or no /proc/self/cgroup at all: the same.
        try folder.write("self-cgroup", "0::/system.slice/other.service\n")
        #expect(resolve([:], in: folder) == systemWide)
        try folder.write("self-cgroup", "4:memory:/system.slice/imgd.service\n")
        #expect(resolve([:], in: folder) == systemWide)
        try FileManager.default.removeItem(atPath: folder.path + "/self-cgroup")
        #expect(resolve([:], in: folder) == systemWide)
        #expect(systemWide.description == "memory pressure: watching \(folder.path)/proc-pressure-memory (trigger some 200000 2000000)")

        try FileManager.default.removeItem(atPath: folder.path + "/proc-pressure-memory")
        guard case .disabled(let reason) = resolve([:], in: folder) else {
            Issue.record("expected disabled without PSI")
            return
        }
        #expect(reason.hasPrefix("no \(folder.path)/proc-pressure-memory: this kernel does not report pressure stalls"))
    }

    @Test("on this machine, with defaults: a PSI trigger (own cgroup or system-wide)",
          .enabled(if: FileManager.default.fileExists(atPath: "/proc/pressure/memory")))
    func thisMachine() {
        guard case .psiTrigger(let path, let trigger) = MemoryPressureSource.resolve(environment: [:]) else {
            Issue.record("expected a PSI trigger")
            return
        }
        #expect(path == "/proc/pressure/memory" || path.hasSuffix("/memory.pressure"))
        #expect(trigger == "some 200000 2000000")
    }

    @Test("each source has the code and path status shows")
    func statusNames() {
        let sources: [(MemoryPressureSource, String, String?)] = [
            (.disabled(reason: "MEMORY_PRESSURE_WATCH is /dev/null"), "off", nil),
            (.systemdWatch(path: "/run/p.fifo", kind: .fifo, write: []), "systemd", "/run/p.fifo"),
            (.psiTrigger(path: "/proc/pressure/memory", trigger: "some 200000 2000000"), "psi-trigger", "/proc/pressure/memory"),
            (.psiPolling(path: "/sys/fs/cgroup/a/memory.pressure", threshold: 10, interval: .seconds(5)), "psi-poll",
             "/sys/fs/cgroup/a/memory.pressure"),
        ]
        for (source, code, path) in sources {
            #expect(source.code == code)
            #expect(source.path == path)
        }
    }

    @Test("the line logged at start names the source in use and, after a fallback, why")
    func watchingDescription() {
        let polling = MemoryPressureSource.psiPolling(path: "/proc/pressure/memory", threshold: 10, interval: .seconds(5))
        #expect(MemoryPressureWatching(source: polling).description == polling.description)
        let refused = MemoryPressureWatching(
            source: polling, refusal: .init(trigger: "some 200000 2000000", errno: EACCES))
        #expect(refused.description == "memory pressure: reading avg10 of /proc/pressure/memory every 5s (pressure above 10.0%); "
            + "the kernel refused the trigger some 200000 2000000: Permission denied")
    }

    @Test("the polling source describes its schedule")
    func pollingDescription() {
        #expect(
            MemoryPressureSource.psiPolling(path: "/proc/pressure/memory", threshold: 10, interval: .seconds(5)).description
                == "memory pressure: reading avg10 of /proc/pressure/memory every 5s (pressure above 10.0%)")
        #expect(
            MemoryPressureSource.psiPolling(path: "/p", threshold: 2.5, interval: .milliseconds(250)).description
                == "memory pressure: reading avg10 of /p every 250ms (pressure above 2.5%)")
    }

    @Test("base64 as systemd writes it: padding optional, whitespace ignored, anything else refused")
    func base64() {
        #expect(Base64.decode("c29tZSAxNTAwMDAgMjAwMDAwMA==") == Array("some 150000 2000000".utf8))
        #expect(Base64.decode("c29tZSAxNTAwMDAgMjAwMDAwMA") == Array("some 150000 2000000".utf8))
        #expect(Base64.decode("c29t\nZSAx") == Array("some 1".utf8))
        #expect(Base64.decode("") == [])
        #expect(Base64.decode("+/8=") == [0xFB, 0xFF])
        #expect(Base64.decode("c29tZQ=x") == nil)
        #expect(Base64.decode("c") == nil)
        #expect(Base64.decode("c2-t") == nil)
        #expect(Base64.decode("c2==") == nil)  // leftover bits not zero
    }

    @Test("avg10 of the some line is read from PSI text; other text has none")
    func psiText() {
        let text = "some avg10=12.34 avg60=1.00 avg300=0.50 total=123\nfull avg10=99.00 avg60=0.00 avg300=0.00 total=0\n"
        #expect(PSIAverage.someAvg10(in: text) == 12.34)
        #expect(PSIAverage.someAvg10(in: "full avg10=99.00 avg60=0.00 avg300=0.00 total=0\n") == nil)
        #expect(PSIAverage.someAvg10(in: "") == nil)
        #expect(PSIAverage.someAvg10(in: "some avg10=x avg60=0\n") == nil)
    }

    @Test("a threshold crossing is reported once per rise above it")
    func crossings() {
        var crossing = ThresholdCrossing(threshold: 10)
        let reports = [0, 5, 10, 11, 50, 12, 10, 3, 20, 20].map { crossing.update(Double($0)) }
        #expect(reports == [false, false, false, true, false, false, false, false, true, false])
        var startsHigh = ThresholdCrossing(threshold: 10)
        let first = startsHigh.update(30)
        #expect(first)  // pressure already high at start is reported once
    }
}
