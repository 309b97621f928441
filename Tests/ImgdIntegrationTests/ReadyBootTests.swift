import Foundation
import ImgdTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `imgd-ready.service` under a real systemd as PID 1: a Debian 12 root (debootstrap, made once
/// and kept at ``rootfs``) booted with `systemd-nspawn -b --volatile=overlay` (the root stays
/// untouched), with the package's units, sysusers and tmpfiles files, the built `imgd` and
/// `imgctl` and the toolchain's runtime bound in. The container shares the host's network, so
/// imgd fetches its hot set from the test server here.
///
/// A unit ordered `After=`/`Requires=imgd-ready.service` (`probe.service`, which writes the time
/// to a folder shared with the test) must start only once the hot set is cached: not while
/// three of its URLs are held by the test server, although imgd.service is active by then.
///
/// The same boot runs `imgd-http.socket` beside `imgd.socket` (moved to a loopback port the test
/// can reach, since the container shares the host's network): systemd passes both sockets by
/// name (`LISTEN_FDNAMES`), and `/readyz` follows readiness, `503` then `200`.
///
/// Slow (a boot; ~2 min more the first time, for debootstrap) and needs root, `systemd-nspawn`
/// and `debootstrap` (Debian packages `systemd-container`, `debootstrap`): it runs only with
/// `IMGD_SYSTEMD_BOOT_TESTS=1`.
@Suite("imgd-ready.service under a real systemd (systemd-nspawn)", .timeLimit(.minutes(10)), .offThePool)
struct ReadyBootTests {
    static let enabled = ProcessInfo.processInfo.environment["IMGD_SYSTEMD_BOOT_TESTS"] == "1"
    /// The kept root: `IMGD_NSPAWN_ROOTFS`, else /var/tmp/imgd-nspawn-rootfs.
    static let rootfs = ProcessInfo.processInfo.environment["IMGD_NSPAWN_ROOTFS"] ?? "/var/tmp/imgd-nspawn-rootfs"

    @Test("a unit After=/Requires=imgd-ready.service starts only once the hot set is cached", .enabled(if: enabled))
    func probeStartsOnlyWhenReady() async throws {
        try #require(getuid() == 0, "needs root (systemd-nspawn)")
        let nspawn = try #require(SystemdTool.locate("systemd-nspawn"), "systemd-nspawn is not installed (Debian package systemd-container)")
        try await Self.makeRootfs()
        let scratch = try ScratchFolder("imgd-boot")
        defer { scratch.remove() }
        chmod(scratch.path, 0o755)
        try await withRunningServer { server in
            // 10 URLs, the last 3 held until the gate opens.
            let hot = (0..<10).map { server.url("/img/boot-\($0).png" + ($0 >= 7 ? "?gate=hot" : "")) }.joined(separator: "\n") + "\n"
            let httpPort = try freeTCPPort()
            let files = try Self.layout(scratch, hotSet: hot, httpPort: httpPort)
            let readyz = { () async -> String in
                (try? await HTTPFaceTests.curl(["-o", "/dev/null", "-w", "%{http_code}", "--max-time", "5", "http://127.0.0.1:\(httpPort)/readyz"]))?.stdout ?? ""
            }
            let runtime = try #require(Self.swiftRuntimeRoot(), "the Swift runtime's folder was not found in /proc/self/maps")
            var arguments = [
                "-D", Self.rootfs, "-b", "--volatile=overlay", "--register=no", "--keep-unit", "-M", "imgd-ready-\(getpid())",
                "--bind-ro=\(files.system):/etc/systemd/system", "--bind-ro=\(files.sysusers):/etc/sysusers.d",
                "--bind-ro=\(files.tmpfiles):/etc/tmpfiles.d", "--bind-ro=\(files.etc):/etc/imgd", "--bind=\(files.out):/var/lib/probe",
                "--bind-ro=\(runtime)", "--bind-ro=\(BinaryRunner.imgdPath):/usr/bin/imgd", "--bind-ro=\(BinaryRunner.imgctlPath):/usr/bin/imgctl",
            ]
            // ISA-L from the host when the root lacks it (a root made before it was included).
            let isal = "/usr/lib/x86_64-linux-gnu/libisal.so.2"
            if !FileManager.default.fileExists(atPath: Self.rootfs + isal), let real = try? FileManager.default.destinationOfSymbolicLink(atPath: isal) {
                arguments.append("--bind-ro=/usr/lib/x86_64-linux-gnu/\(real):\(isal)")
            }
            let console = scratch.path + "/console.log"
            let container = try ChildProcess(
                nspawn, arguments, environment: DaemonProcess.environment(adding: ["SYSTEMD_NSPAWN_UNIFIED_HIERARCHY": "1"]),
                stdout: .file(console), stderr: .file(console))
            defer { if container.isRunning { container.signal(SIGKILL) } }
            let log = { (try? String(contentsOfFile: console, encoding: .utf8)) ?? "" }

            // imgd booted and asked for the whole hot set: 7 answered, 3 held.
            #expect(await server.waitForRequests(atLeast: 10, timeout: .seconds(180)), "console:\n\(log())")
            let leader = try #require(Self.leader(of: container.pid), "no init process under systemd-nspawn")
            #expect(try await Self.inside(leader, ["systemctl", "is-active", "imgd.service"]) == "active", "imgd.service is not active")
            // Not ready: the probe has not run (polled for 3 s).
            let stamp = files.out + "/stamp"
            #expect(await !eventually(timeout: .seconds(3)) { FileManager.default.fileExists(atPath: stamp) }, "probe.service ran before the hot set was cached")
            #expect(try await Self.inside(leader, ["systemctl", "is-active", "imgd-ready.service"]) == "activating")
            // The HTTP face came through imgd-http.socket, by name: not ready yet.
            #expect(await readyz() == "503", "console:\n\(log())")

            var now = timespec()
            clock_gettime(CLOCK_REALTIME, &now)
            let opened = Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec)
            server.openGate("hot")
            // The shell makes the file, then writes the line: wait for the whole line.
            let read = { Int64((try? String(contentsOfFile: stamp, encoding: .utf8)).flatMap { $0.hasSuffix("\n") ? $0.dropLast() : nil } ?? "") }
            #expect(await eventually(timeout: .seconds(60)) { read() != nil }, "console:\n\(log())")
            let written = read() ?? 0
            #expect(written > opened, "the probe ran at \(written), before the gate opened at \(opened)")
            #expect(try await Self.inside(leader, ["systemctl", "is-active", "imgd-ready.service"]) == "active")
            #expect(await readyz() == "200")
            let status = try await Self.inside(leader, ["imgctl", "--json", "status", "--socket", "/run/imgd/imgd.sock"])
            #expect(status.contains(#""ready":true"#) && status.contains(#""cached":10"#), "\(status)")

            container.signal(SIGTERM)
            if await container.exited(within: .seconds(60)) == nil { Issue.record("the container did not stop within 60 s") }
        }
    }

    /// The files the container sees: units (with `probe.service` and the wants links),
    /// sysusers, tmpfiles, /etc/imgd (configuration and hot set) and the probe's folder.
    static func layout(_ scratch: ScratchFolder, hotSet: String, httpPort: Int) throws
        -> (system: String, sysusers: String, tmpfiles: String, etc: String, out: String)
    {
        let manager = FileManager.default
        let system = scratch.path + "/system", etc = scratch.path + "/etc-imgd", out = scratch.path + "/out"
        let sysusers = scratch.path + "/sysusers", tmpfiles = scratch.path + "/tmpfiles"
        for folder in [system + "/multi-user.target.wants", system + "/sockets.target.wants", etc, out, sysusers, tmpfiles] {
            try manager.createDirectory(atPath: folder, withIntermediateDirectories: true)
            chmod(folder, 0o755)
        }
        for unit in ["imgd.service", "imgd.socket", "imgd-ready.service"] {
            try SystemdUnitTests.text(unit).write(toFile: system + "/" + unit, atomically: false, encoding: .utf8)
        }
        let httpSocket = try SystemdUnitTests.text("imgd-http.socket")
            .replacingOccurrences(of: "\nListenStream=/run/imgd/http.sock\n", with: "\nListenStream=127.0.0.1:\(httpPort)\n")
        try httpSocket.write(toFile: system + "/imgd-http.socket", atomically: false, encoding: .utf8)
        try manager.createSymbolicLink(atPath: system + "/sockets.target.wants/imgd-http.socket", withDestinationPath: "../imgd-http.socket")
        try """
            [Unit]
            Description=an application that needs the hot set
            Requires=imgd-ready.service
            After=imgd-ready.service

            [Service]
            Type=oneshot
            ExecStart=/bin/sh -c 'date +%%s%%N > /var/lib/probe/stamp'
            """.write(toFile: system + "/probe.service", atomically: false, encoding: .utf8)
        try manager.createSymbolicLink(atPath: system + "/multi-user.target.wants/probe.service", withDestinationPath: "../probe.service")
        try manager.createSymbolicLink(atPath: system + "/multi-user.target.wants/imgd.service", withDestinationPath: "../imgd.service")
        try manager.createSymbolicLink(atPath: system + "/sockets.target.wants/imgd.socket", withDestinationPath: "../imgd.socket")
        try SystemdUnitTests.text("imgd.sysusers").write(toFile: sysusers + "/imgd.conf", atomically: false, encoding: .utf8)
        try SystemdUnitTests.text("imgd.tmpfiles").write(toFile: tmpfiles + "/imgd.conf", atomically: false, encoding: .utf8)
        try "ready-lists = [\"/etc/imgd/hot.txt\"]\nhttp-listen = \"127.0.0.1:\(httpPort)\"\n".write(toFile: etc + "/imgd.toml", atomically: false, encoding: .utf8)
        try hotSet.write(toFile: etc + "/hot.txt", atomically: false, encoding: .utf8)
        return (system, sysusers, tmpfiles, etc, out)
    }

    /// Makes the kept root with debootstrap unless it is there (~2 min).
    static func makeRootfs() async throws {
        guard !FileManager.default.fileExists(atPath: rootfs + "/usr/lib/systemd/systemd") else { return }
        let debootstrap = try #require(SystemdTool.locate("debootstrap"), "debootstrap is not installed (Debian package debootstrap)")
        let run = try await ChildProcess.run(
            debootstrap,
            ["--variant=minbase", "--include=systemd,systemd-sysv,dbus,libcurl4,libsqlite3-0,libsystemd0,libisal2", "bookworm", rootfs,
             "http://deb.debian.org/debian"],
            timeout: .seconds(600))
        try #require(run.status == 0, "debootstrap failed: \(run.stdout)\(run.stderr)")
    }

    /// The toolchain's root (`/opt/swift`): where `swift` on PATH lives, holding the runtime
    /// the debug binaries load (`usr/lib/swift/linux`, their RUNPATH).
    static func swiftRuntimeRoot() -> String? {
        guard let swift = SystemdTool.locate("swift") else { return nil }
        // Not resolved: `swift` is a link to `swift-driver` beside it.
        let real = URL(fileURLWithPath: swift).deletingLastPathComponent().resolvingSymlinksInPath().path + "/swift"
        guard real.hasSuffix("/usr/bin/swift") else { return nil }
        let root = String(real.dropLast("/usr/bin/swift".count))
        return FileManager.default.fileExists(atPath: root + "/usr/lib/swift/linux/libswiftCore.so") ? root : nil
    }

    /// The container's init: the child of systemd-nspawn (polled while it starts).
    static func leader(of nspawn: pid_t) -> pid_t? {
        let text = (try? String(contentsOfFile: "/proc/\(nspawn)/task/\(nspawn)/children", encoding: .utf8)) ?? ""
        return text.split(separator: " ").first.flatMap { pid_t($0) }
    }

    /// Runs `command` inside the container (all its namespaces); its stdout, trimmed.
    static func inside(_ leader: pid_t, _ command: [String]) async throws -> String {
        let run = try await ChildProcess.run("/usr/bin/nsenter", ["-t", "\(leader)", "-a"] + command, timeout: .seconds(30))
        return run.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
