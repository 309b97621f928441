import ImgdCore
import ImgdMemoryPressure

#if canImport(Glibc)
import Glibc
#endif

/// Where the courtesy loop reads pressure, and the reading: the highest `some avg10` of its
/// PSI files (CPU and I/O), in percent.
///
/// Without `courtesy-pressure`, the files are the service's own cgroup's `cpu.pressure` and
/// `io.pressure` when it has them (cgroup v2, not the root: under systemd, the pressure the
/// service's siblings feel from it too), else `/proc/pressure/cpu` and `/proc/pressure/io`
/// (the whole machine). None readable: the loop has nothing to go on and leaves the cap alone.
struct StallShareReader: Sendable, Equatable {
    let files: [String]

    /// The files named, or the automatic choice.
    init(configured: [String], procSelfCgroup: String = "/proc/self/cgroup", cgroupRoot: String = "/sys/fs/cgroup") {
        if !configured.isEmpty {
            files = configured
        } else if let own = Self.ownCgroup(procSelfCgroup: procSelfCgroup, cgroupRoot: cgroupRoot) {
            files = [own + "/cpu.pressure", own + "/io.pressure"]
        } else {
            files = ["/proc/pressure/cpu", "/proc/pressure/io"]
        }
    }

    /// Each file's `some avg10` (nil for one that cannot be read), and the highest of them.
    func read() -> (share: Double?, readings: [(file: String, avg10: Double?)]) {
        let readings = files.map { file in (file: file, avg10: (try? PSIAverage.read(file)) ?? nil) }
        return (readings.compactMap { $0.avg10 }.max(), readings)
    }

    /// The process's cgroup v2 folder, when it is not the root and has a `cpu.pressure`.
    private static func ownCgroup(procSelfCgroup: String, cgroupRoot: String) -> String? {
        let descriptor = open(procSelfCgroup, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var bytes = [UInt8](repeating: 0, count: 4096)
        let count = Glibc.read(descriptor, &bytes, bytes.count)
        guard count > 0 else { return nil }
        let text = String(decoding: bytes[..<count], as: UTF8.self)
        guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix("0::/") }) else { return nil }
        var cgroup = String(line.dropFirst(3))
        while cgroup.hasSuffix("/") { cgroup.removeLast() }
        guard !cgroup.isEmpty else { return nil }
        let root = cgroupRoot.hasSuffix("/") ? String(cgroupRoot.dropLast()) : cgroupRoot
        let folder = root + cgroup
        return access(folder + "/cpu.pressure", R_OK) == 0 ? folder : nil
    }
}
