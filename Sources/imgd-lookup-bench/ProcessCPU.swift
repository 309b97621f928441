#if canImport(Glibc)
import Glibc
#endif

/// CPU time (user + system) used by processes, so a run can say what the client cost and what
/// the server cost for the same requests.
enum ProcessCPU {
    /// This process, all its threads.
    static func ownSeconds() -> Double {
        var usage = rusage()
        getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
        return seconds(usage.ru_utime) + seconds(usage.ru_stime)
    }

    /// Another process, from `/proc/PID/stat` (fields 14 and 15, in clock ticks); nil when it
    /// cannot be read (gone, or not ours to read).
    static func seconds(ofProcess pid: Int32) -> Double? {
        guard let file = fopen("/proc/\(pid)/stat", "r") else { return nil }
        defer { fclose(file) }
        var buffer = [CChar](repeating: 0, count: 1024)
        guard fgets(&buffer, Int32(buffer.count), file) != nil else { return nil }
        let line = buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        // The command name (field 2) is in parentheses and may hold spaces: count from after it.
        guard let close = line.lastIndex(of: ")") else { return nil }
        let fields = line[line.index(after: close)...].split(separator: " ")
        // fields[0] is field 3 (state), so utime (14) and stime (15) are fields[11] and fields[12].
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    private static func seconds(_ time: timeval) -> Double {
        Double(time.tv_sec) + Double(time.tv_usec) / 1e6
    }
}
