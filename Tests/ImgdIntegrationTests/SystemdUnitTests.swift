import Foundation
import ImgdTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The files under `systemd/`, checked with systemd's own tools (252 on Debian 12): the units
/// verify clean, the service's exposure stays at or below 2.0, every directive the daemon and its
/// sandbox rely on is there, and sysusers and tmpfiles make the user and the spool they promise.
@Suite("systemd units (systemd/)", .timeLimit(.minutes(10)), .offThePool)
struct SystemdUnitTests {
    /// `systemd/` of this package, found from this file's path.
    static let unitFolder = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("systemd").path

    static func text(_ name: String) throws -> String {
        try String(contentsOfFile: unitFolder + "/" + name, encoding: .utf8)
    }

    @Test("systemd-analyze verify: the service and the socket together, running the built imgd, report nothing about imgd")
    func verify() async throws {
        let scratch = try ScratchFolder()
        defer { scratch.remove() }
        // /usr/bin/imgd is not installed here: point ExecStart at the binary built with the
        // tests, so that verify's check of the executable has nothing to excuse.
        let built = BinaryRunner.imgdPath
        #expect(FileManager.default.isExecutableFile(atPath: built), "no built imgd at \(built)")
        let shipped = try Self.text("imgd.service")
        let quoted = "\"" + built.replacingOccurrences(of: "%", with: "%%") + "\""
        let service = shipped.replacingOccurrences(of: "\nExecStart=/usr/bin/imgd ", with: "\nExecStart=\(quoted) ")
        #expect(service != shipped, "imgd.service has no 'ExecStart=/usr/bin/imgd ' line to point at the built binary")
        // ExecReload= runs imgctl, checked the same way.
        let imgctl = "\"" + BinaryRunner.imgctlPath.replacingOccurrences(of: "%", with: "%%") + "\""
        let reloading = service.replacingOccurrences(of: "\nExecReload=/usr/bin/imgctl ", with: "\nExecReload=\(imgctl) ")
        #expect(reloading != service, "imgd.service has no 'ExecReload=/usr/bin/imgctl ' line to point at the built binary")
        try scratch.write("imgd.service", reloading)
        try scratch.write("imgd.socket", try Self.text("imgd.socket"))
        try scratch.write("imgd-http.socket", try Self.text("imgd-http.socket"))

        let run = try await SystemdTool.run(
            "systemd-analyze",
            ["verify", "--no-pager", scratch.path + "/imgd.service", scratch.path + "/imgd.socket", scratch.path + "/imgd-http.socket"])
        guard let run else { return }
        #expect(run.status == 0, "systemd-analyze verify failed:\n\(run.text)")
        // verify also loads the host's units that ours pull in (network-online.target,
        // multi-user.target, sockets.target and their own dependencies) and reports trouble in
        // those files too, which is not ours to fix. Every line about our units names them — by
        // unit name or by the path of the copy, both containing "imgd" — as does any line about
        // the binary: none of those may appear.
        let ours = run.lines.filter { $0.contains("imgd") }
        #expect(ours.isEmpty, "systemd-analyze verify reported:\n\(ours.joined(separator: "\n"))")
    }

    @Test("systemd-analyze security --offline=yes: overall exposure of imgd.service at most 2.0")
    func exposure() async throws {
        let run = try await SystemdTool.run(
            "systemd-analyze", ["security", "--offline=yes", "--no-pager", Self.unitFolder + "/imgd.service"])
        guard let run else { return }
        #expect(run.status == 0, "systemd-analyze security failed:\n\(run.text)")
        // "→ Overall exposure level for imgd.service: 1.1 OK 🙂"
        let marker = "Overall exposure level for imgd.service:"
        let figure = run.lines.first { $0.contains(marker) }
            .flatMap { line in line.components(separatedBy: marker).last?.split(separator: " ").first }
            .flatMap { Double($0) }
        let exposure = try #require(figure, "no '\(marker) N.N' line in:\n\(run.text)")
        #expect(exposure <= 2.0, "exposure \(exposure) is above 2.0:\n\(run.text)")
    }

    @Test("every directive the daemon and its sandbox rely on is in the unit, with its value", arguments: Directive.required)
    func directive(_ directive: Directive) throws {
        let unit = try UnitFile(parsing: try Self.text(directive.unit))
        // Every assignment of the key, in order: a list key (SystemCallFilter=) must not gain
        // entries, and a key reset to empty (CapabilityBoundingSet=) must not be set again.
        #expect(unit.values(directive.section, directive.key) == directive.values)
    }

    @Test("the units agree with each other: spool, socket path, user and group")
    func consistent() throws {
        let service = try UnitFile(parsing: try Self.text("imgd.service"))
        let socket = try UnitFile(parsing: try Self.text("imgd.socket"))
        let spool = "/var/spool/imgd"
        #expect(service.values("Service", "ExecStart").first?.contains("--spool \(spool)") == true)
        #expect(service.values("Service", "ReadWritePaths") == [spool])
        let tmpfilesPaths = try Self.text("imgd.tmpfiles").split(separator: "\n")
            .filter { !$0.hasPrefix("#") && !$0.trimmingCharacters(in: .whitespaces).isEmpty }
            .map { $0.split(separator: " ", omittingEmptySubsequences: true)[1] }
        #expect(tmpfilesPaths == [spool, spool + "/done", spool + "/failed"].map { Substring($0) })
        // The socket file lives in the service's RuntimeDirectory= and is named as the daemon
        // names it there.
        #expect(service.values("Service", "RuntimeDirectory") == ["imgd"])
        #expect(socket.values("Socket", "ListenStream") == ["/run/imgd/imgd.sock"])
        #expect(socket.values("Socket", "SocketUser") == service.values("Service", "User"))
        #expect(socket.values("Socket", "SocketGroup") == service.values("Service", "Group"))
        #expect(service.values("Service", "Sockets") == ["imgd.socket"])
        #expect(socket.values("Socket", "Service") == ["imgd.service"])
        // The HTTP face's socket: beside the control socket, the same owner and mode, named so
        // that imgd tells the two apart.
        let http = try UnitFile(parsing: try Self.text("imgd-http.socket"))
        #expect(http.values("Socket", "ListenStream") == ["/run/imgd/http.sock"])
        #expect(http.values("Socket", "SocketUser") == socket.values("Socket", "SocketUser"))
        #expect(http.values("Socket", "SocketGroup") == socket.values("Socket", "SocketGroup"))
        #expect(http.values("Socket", "SocketMode") == ["0660"])
        #expect(http.values("Socket", "FileDescriptorName") == ["http"])
        #expect(socket.values("Socket", "FileDescriptorName") == ["control"])
        #expect(http.values("Socket", "Service") == ["imgd.service"])
    }

    @Test("systemd-sysusers --root makes system user and group imgd, home /var/lib/imgd, no login shell")
    func sysusers() async throws {
        let root = try ScratchFolder()
        defer { root.remove() }
        try installConfig(in: root)
        let run = try await SystemdTool.run("systemd-sysusers", ["--root=" + root.path, "imgd.conf"])
        guard let run else { return }
        #expect(run.status == 0, "systemd-sysusers failed:\n\(run.text)")

        // name:x:uid:gid:gecos:home:shell and name:x:gid:members
        let user = try #require(try entry("imgd", fields: 7, in: root.path + "/etc/passwd"), "no imgd in /etc/passwd:\n\(run.text)")
        let group = try #require(try entry("imgd", fields: 4, in: root.path + "/etc/group"), "no imgd in /etc/group:\n\(run.text)")
        let uid = try #require(Int(user[2])), gid = try #require(Int(group[2]))
        #expect(uid > 0 && uid < 1000, "uid \(uid) is not in the system range")
        #expect(Int(user[3]) == gid)
        #expect(user[5] == "/var/lib/imgd")
        #expect(user[6] == "/usr/sbin/nologin")
    }

    @Test(
        "systemd-tmpfiles --root --create makes the spool: imgd:imgd 3770 (setgid and sticky), done/ and failed/ 2750",
        .enabled(if: getuid() == 0, "systemd-tmpfiles chowns to imgd: run the tests as root"))
    func tmpfiles() async throws {
        let root = try ScratchFolder()
        defer { root.remove() }
        try installConfig(in: root)
        // User and group imgd first, as at boot: tmpfiles resolves them in the root's /etc/passwd.
        guard let users = try await SystemdTool.run("systemd-sysusers", ["--root=" + root.path, "imgd.conf"]) else { return }
        #expect(users.status == 0, "systemd-sysusers failed:\n\(users.text)")
        let run = try await SystemdTool.run("systemd-tmpfiles", ["--root=" + root.path, "--create", "imgd.conf"])
        guard let run else { return }
        #expect(run.status == 0, "systemd-tmpfiles failed:\n\(run.text)")

        let user = try #require(try entry("imgd", fields: 7, in: root.path + "/etc/passwd"))
        let uid = try #require(UInt32(user[2])), gid = try #require(UInt32(user[3]))
        for (folder, mode) in [("", 0o3770), ("/done", 0o2750), ("/failed", 0o2750)] {
            let path = root.path + "/var/spool/imgd" + folder
            var status = stat()
            try #require(stat(path, &status) == 0, "\(path) was not created")
            #expect(status.st_mode & S_IFMT == S_IFDIR, "\(path) is not a folder")
            #expect(String(status.st_mode & 0o7777, radix: 8) == String(mode, radix: 8), "mode of \(path)")
            #expect(status.st_uid == uid && status.st_gid == gid, "owner of \(path)")
        }
    }

    /// Puts the sysusers and tmpfiles files where a package installs them, under `root`.
    private func installConfig(in root: ScratchFolder) throws {
        let manager = FileManager.default
        for folder in ["etc", "usr/lib/sysusers.d", "usr/lib/tmpfiles.d"] {
            try manager.createDirectory(atPath: root.path + "/" + folder, withIntermediateDirectories: true)
        }
        try root.write("usr/lib/sysusers.d/imgd.conf", try Self.text("imgd.sysusers"))
        try root.write("usr/lib/tmpfiles.d/imgd.conf", try Self.text("imgd.tmpfiles"))
    }

    /// The `:`-separated fields of `name`'s line in a passwd-style file; nil when it has no such
    /// line of `fields` fields.
    private func entry(_ name: String, fields: Int, in path: String) throws -> [String]? {
        try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n")
            .map { $0.split(separator: ":", omittingEmptySubsequences: false).map(String.init) }
            .first { $0.first == name && $0.count == fields }
    }
}

/// One directive a unit must have: every value assigned to `key` in `[section]`, in order.
struct Directive: Sendable, CustomTestStringConvertible {
    let unit: String
    let section: String
    let key: String
    let values: [String]

    var testDescription: String {
        values.isEmpty ? "\(unit) [\(section)] no \(key)=" : "\(unit) [\(section)] \(key)=\(values.joined(separator: " | "))"
    }

    static func service(_ key: String, _ values: String...) -> Directive {
        Directive(unit: "imgd.service", section: "Service", key: key, values: values)
    }

    static func socket(_ key: String, _ values: String...) -> Directive {
        Directive(unit: "imgd.socket", section: "Socket", key: key, values: values)
    }

    static let required: [Directive] = [
        // What the daemon does.
        .service("Type", "notify"),
        .service("NotifyAccess", "main"),
        .service("ExecStart", "/usr/bin/imgd --config /etc/imgd/imgd.toml --spool /var/spool/imgd"),
        .service("ExecReload", "/usr/bin/imgctl reload --socket /run/imgd/imgd.sock"),
        .service("WatchdogSec", "30s"),
        .service("TimeoutStopSec", "15s"),
        .service("Restart", "on-failure"),
        .service("RestartSec", "2s"),
        .service("Sockets", "imgd.socket"),
        .service("User", "imgd"),
        .service("Group", "imgd"),
        .service("UMask", "0027"),
        .service("StateDirectory", "imgd"),
        .service("StateDirectoryMode", "0750"),
        .service("CacheDirectory", "imgd"),
        .service("CacheDirectoryMode", "0750"),
        .service("RuntimeDirectory", "imgd"),
        .service("RuntimeDirectoryMode", "0750"),
        .service("RuntimeDirectoryPreserve", "yes"),
        .service("ReadWritePaths", "/var/spool/imgd"),
        .service("MemoryHigh", "384M"),
        .service("MemoryMax", "512M"),
        .service("LimitNOFILE", "16384"),
        // The sandbox.
        .service("ProtectSystem", "strict"),
        .service("ProtectHome", "yes"),
        .service("PrivateTmp", "yes"),
        .service("PrivateDevices", "yes"),
        .service("DevicePolicy", "closed"),
        .service("PrivateMounts", "yes"),
        // Not PrivateUsers=: peers and list owners must show with their real uids.
        .service("PrivateUsers"),
        .service("PrivateIPC", "yes"),
        .service("NoNewPrivileges", "yes"),
        .service("CapabilityBoundingSet", ""),
        .service("AmbientCapabilities", ""),
        .service("RestrictAddressFamilies", "AF_UNIX AF_INET AF_INET6"),
        .service("RestrictNamespaces", "yes"),
        .service("SystemCallFilter", "@system-service", "~@privileged @resources", "setpriority"),
        .service("LimitNICE", "-4"),
        .service("SystemCallErrorNumber", "EPERM"),
        .service("SystemCallArchitectures", "native"),
        .service("LockPersonality", "yes"),
        .service("MemoryDenyWriteExecute", "yes"),
        .service("ProtectKernelTunables", "yes"),
        .service("ProtectKernelModules", "yes"),
        .service("ProtectKernelLogs", "yes"),
        .service("ProtectControlGroups", "yes"),
        .service("ProtectClock", "yes"),
        .service("ProtectHostname", "yes"),
        .service("ProtectProc", "invisible"),
        .service("ProcSubset", "pid"),
        .service("RestrictRealtime", "yes"),
        .service("RestrictSUIDSGID", "yes"),
        .service("RemoveIPC", "yes"),
        // It must reach any host but the metadata and link-local ranges the address policy
        // denies by default (the kernel's check behind imgd's): no allow list, no wider filter.
        .service("IPAddressDeny", "169.254.0.0/16 fe80::/10 fd00:ec2::254/128 100.100.100.200/32"),
        .service("IPAddressAllow"),
        .service("PrivateNetwork"),
        // The socket.
        .socket("ListenStream", "/run/imgd/imgd.sock"),
        .socket("SocketMode", "0660"),
        .socket("SocketUser", "imgd"),
        .socket("SocketGroup", "imgd"),
        .socket("DirectoryMode", "0755"),
        .socket("RemoveOnStop", "yes"),
        .socket("Service", "imgd.service"),
        Directive(unit: "imgd.socket", section: "Install", key: "WantedBy", values: ["sockets.target"]),
        Directive(unit: "imgd.service", section: "Install", key: "WantedBy", values: ["multi-user.target"]),
    ]
}

/// A unit file as systemd reads it: sections of `Key=value` assignments, comments (`#`, `;`)
/// dropped, lines ending in `\` joined with the next.
struct UnitFile {
    private var assignments: [(section: String, key: String, value: String)] = []

    init(parsing text: String) throws {
        var section = ""
        var pending = ""
        for raw in text.split(separator: "\n", omittingEmptySubsequences: false) {
            var line = pending + raw.trimmingCharacters(in: .whitespaces)
            pending = ""
            if line.hasPrefix("#") || line.hasPrefix(";") || line.isEmpty { continue }
            if line.hasSuffix("\\") {
                line.removeLast()
                pending = line + " "
                continue
            }
            if line.hasPrefix("[") && line.hasSuffix("]") {
                section = String(line.dropFirst().dropLast())
                continue
            }
            guard let equals = line.firstIndex(of: "=") else {
                throw UnitFileError(line: line)
            }
            assignments.append(
                (section, line[..<equals].trimmingCharacters(in: .whitespaces),
                 line[line.index(after: equals)...].trimmingCharacters(in: .whitespaces)))
        }
    }

    /// Every value assigned to `key` in `[section]`, in file order.
    func values(_ section: String, _ key: String) -> [String] {
        assignments.filter { $0.section == section && $0.key == key }.map(\.value)
    }
}

struct UnitFileError: Error, CustomStringConvertible {
    let line: String
    var description: String { "not a Key=value line: \(line)" }
}

/// Runs systemd's command-line tools for the tests, off Swift's cooperative pool.
enum SystemdTool {
    struct Run {
        let status: Int32
        /// Standard output and standard error, in that order.
        let text: String
        var lines: [String] { text.split(separator: "\n").map(String.init) }
    }

    /// Where `name` is: the first folder of PATH (then the usual system folders) that has it.
    static func locate(_ name: String) -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
        let folders = path.split(separator: ":").map(String.init) + ["/usr/bin", "/bin", "/usr/sbin", "/sbin"]
        return folders.map { $0 + "/" + name }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// Runs `name` with `arguments`, killed if it outlives `timeout`. Records an issue (a failed
    /// test that says what is missing) and returns nil when `name` is not installed.
    static func run(_ name: String, _ arguments: [String], timeout: Duration = .seconds(60)) async throws -> Run? {
        guard let executable = locate(name) else {
            Issue.record(
                "\(name) is not installed (not on PATH, nor in /usr/bin, /bin, /usr/sbin, /sbin): these checks need systemd's tools (Debian package systemd)")
            return nil
        }
        // Plain text, whatever the caller's terminal settings.
        let environment = ProcessInfo.processInfo.environment.merging(
            ["SYSTEMD_COLORS": "0", "SYSTEMD_PAGER": "", "SYSTEMD_LOG_COLOR": "0", "LC_ALL": "C.UTF-8"]) { $1 }
        let output = try await ChildProcess.run(executable, arguments, environment: environment, timeout: timeout)
        return Run(status: output.status, text: output.stdout + output.stderr)
    }
}
