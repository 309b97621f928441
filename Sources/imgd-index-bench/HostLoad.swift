#if canImport(Glibc)
import Glibc
#endif

/// What else the machine was doing: the bench shares its CPUs with other processes (and, in a
/// virtual machine, its virtual CPUs with other guests), which a lookup's latency shows too.
enum HostLoad {
    /// The 1-minute load average, as `/proc/loadavg` prints it.
    static func loadAverage() -> String {
        firstLine(of: "/proc/loadavg")?.split(separator: " ").first.map(String.init) ?? "?"
    }

    /// Time the host did not run this machine's virtual CPUs (all of them, summed), in
    /// milliseconds since boot: the `steal` column of `/proc/stat`.
    static func stolenMilliseconds() -> Int {
        guard let line = firstLine(of: "/proc/stat") else { return 0 }
        let fields = line.split(separator: " ")  // "cpu user nice system idle iowait irq softirq steal …"
        guard fields.count > 8, let ticks = Int(fields[8]) else { return 0 }
        return ticks * 1000 / sysconf(Int32(_SC_CLK_TCK))
    }

    private static func firstLine(of path: String) -> String? {
        guard let file = fopen(path, "r") else { return nil }
        defer { fclose(file) }
        var line = [CChar](repeating: 0, count: 512)
        guard fgets(&line, Int32(line.count), file) != nil else { return nil }
        return line.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }
}
