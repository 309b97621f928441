#if canImport(Glibc)
import Glibc
#endif
import ImgdCore

extension MemoryPressureSource {
    /// The longest `MEMORY_PRESSURE_WRITE` accepted, in decoded bytes: 4 KiB. A PSI trigger is
    /// under 32 bytes; anything much longer is a mistake, not a trigger.
    public static let maximumWriteLength = 4096

    /// Decides where memory pressure comes from.
    ///
    /// 1. `MEMORY_PRESSURE_WATCH`, when set (systemd's protocol): empty or `/dev/null` turns
    ///    memory pressure off; otherwise the path is watched as what it is — a regular file (a
    ///    PSI file), a FIFO or a Unix socket — after writing the base64-decoded
    ///    `MEMORY_PRESSURE_WRITE` to it. A path that is none of these, or an invalid
    ///    `MEMORY_PRESSURE_WRITE`, turns memory pressure off with the reason in ``description``:
    ///    systemd asked for something we cannot do, and guessing would watch the wrong thing.
    /// 2. The process's own cgroup v2 `memory.pressure` (the `0::/path` line of
    ///    `procSelfCgroup`, under `cgroupRoot`), if that file exists, with ``defaultTrigger``.
    /// 3. `procPressureMemory` (system-wide PSI), with ``defaultTrigger``.
    /// 4. Otherwise disabled: the kernel has no PSI.
    ///
    /// Every path is a parameter so tests can point it at folders of their own.
    public static func resolve(
        environment: [String: String],
        procSelfCgroup: String = "/proc/self/cgroup",
        cgroupRoot: String = "/sys/fs/cgroup",
        procPressureMemory: String = "/proc/pressure/memory"
    ) -> MemoryPressureSource {
        if let watch = environment["MEMORY_PRESSURE_WATCH"] {
            return systemdWatch(watch, write: environment["MEMORY_PRESSURE_WRITE"])
        }
        if let own = ownCgroupPressureFile(procSelfCgroup: procSelfCgroup, cgroupRoot: cgroupRoot) {
            return .psiTrigger(path: own, trigger: defaultTrigger)
        }
        if fileType(procPressureMemory) == S_IFREG {
            return .psiTrigger(path: procPressureMemory, trigger: defaultTrigger)
        }
        return .disabled(
            reason: "no \(procPressureMemory): this kernel does not report pressure stalls (needs Linux 4.20+ with PSI enabled)")
    }

    private static func systemdWatch(_ path: String, write encoded: String?) -> MemoryPressureSource {
        if path.isEmpty { return .disabled(reason: "MEMORY_PRESSURE_WATCH is empty") }
        if path == "/dev/null" { return .disabled(reason: "MEMORY_PRESSURE_WATCH is /dev/null") }
        guard path.hasPrefix("/") else {
            return .disabled(reason: "MEMORY_PRESSURE_WATCH=\(path) is not an absolute path, ignoring it")
        }
        var write: [UInt8] = []
        if let encoded {
            guard encoded.utf8.count <= (maximumWriteLength + 2) / 3 * 4 + 64,
                let decoded = Base64.decode(encoded), decoded.count <= maximumWriteLength
            else {
                return .disabled(
                    reason: "MEMORY_PRESSURE_WRITE is not base64 of at most \(maximumWriteLength) bytes, ignoring MEMORY_PRESSURE_WATCH")
            }
            write = decoded
        }
        let type = fileType(path)
        switch type {
        case S_IFREG:
            return .systemdWatch(path: path, kind: .psiFile, write: write)
        case S_IFIFO:
            return .systemdWatch(path: path, kind: .fifo, write: write)
        case S_IFSOCK:
            guard path.utf8.count <= UnixSocketAddress.maximumLength else {
                return .disabled(
                    reason: "MEMORY_PRESSURE_WATCH=\(path) is a socket path longer than \(UnixSocketAddress.maximumLength) bytes, ignoring it")
            }
            return .systemdWatch(path: path, kind: .socket, write: write)
        case nil:
            return .disabled(
                reason: "MEMORY_PRESSURE_WATCH=\(path): \(String(cString: strerror(errno))), ignoring it")
        default:
            return .disabled(reason: "MEMORY_PRESSURE_WATCH=\(path) is not a PSI file, FIFO or socket, ignoring it")
        }
    }

    /// `cgroupRoot` + the `0::` path of `procSelfCgroup` + `/memory.pressure`, when that file
    /// exists. The root cgroup has none, nor has a cgroup v1-only system.
    private static func ownCgroupPressureFile(procSelfCgroup: String, cgroupRoot: String) -> String? {
        guard let bytes = try? DescriptorIO.readFile(procSelfCgroup, limit: 64 << 10) else { return nil }
        let text = String(decoding: bytes, as: UTF8.self)
        guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix("0::/") }) else { return nil }
        var cgroup = String(line.dropFirst(3))
        while cgroup.hasSuffix("/") { cgroup.removeLast() }
        let root = cgroupRoot.hasSuffix("/") ? String(cgroupRoot.dropLast()) : cgroupRoot
        let path = root + cgroup + "/memory.pressure"
        return fileType(path) == S_IFREG ? path : nil
    }

    /// The `S_IFMT` bits of what `path` names, following links; nil (with `errno` set) when it
    /// cannot be examined.
    private static func fileType(_ path: String) -> mode_t? {
        var status = stat()
        guard stat(path, &status) == 0 else { return nil }
        return status.st_mode & S_IFMT
    }
}
