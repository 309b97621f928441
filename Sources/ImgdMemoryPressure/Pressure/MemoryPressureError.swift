#if canImport(Glibc)
import Glibc
#endif

/// Why ``MemoryPressureMonitor/run(onWatching:)`` could not watch, or stopped watching. Each message names
/// the path and the system's reason, and says what to check; the daemon logs it once and carries
/// on without pressure events (the `purge` command still works).
public enum MemoryPressureError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The PSI file or FIFO could not be opened.
    case cannotOpen(path: String, errno: Int32)
    /// systemd's memory-pressure socket refused the connection or is not there.
    case cannotConnect(path: String, errno: Int32)
    /// The trigger (or `MEMORY_PRESSURE_WRITE`'s bytes) could not be written.
    case cannotWrite(path: String, errno: Int32)
    /// Reading the watched file or socket failed.
    case readFailed(path: String, errno: Int32)
    /// The file to poll has no `some avg10=` line.
    case notAPressureFile(path: String)
    /// The other end of systemd's memory-pressure socket closed the connection.
    case connectionClosed(path: String)
    /// The kernel flagged an error on the watched file: a PSI file whose cgroup was removed or
    /// that has no trigger.
    case stoppedReporting(path: String)
    /// Waiting (`poll`) failed.
    case waitFailed(path: String, errno: Int32)
    /// The watching thread or its wake-up descriptors could not be created.
    case cannotStartThread(errno: Int32)

    public var description: String {
        switch self {
        case .cannotOpen(let path, let code):
            "cannot open memory pressure file \(path): \(Self.reason(code)) (check it exists and is readable, or set MEMORY_PRESSURE_WATCH=/dev/null to turn memory pressure off)"
        case .cannotConnect(let path, let code):
            "cannot connect to memory pressure socket \(path): \(Self.reason(code)) (is the service listening there running?)"
        case .cannotWrite(let path, let code):
            "cannot write the memory pressure trigger to \(path): \(Self.reason(code)) (check MEMORY_PRESSURE_WRITE, or the permissions of the file)"
        case .readFailed(let path, let code):
            "cannot read memory pressure from \(path): \(Self.reason(code))"
        case .notAPressureFile(let path):
            "\(path) is not a pressure file: it has no 'some avg10=' line (use a cgroup's memory.pressure or /proc/pressure/memory)"
        case .connectionClosed(let path):
            "memory pressure socket \(path) closed the connection: no more pressure events from it until imgd restarts"
        case .stoppedReporting(let path):
            "the kernel stopped reporting memory pressure on \(path) (was its cgroup removed, or is no trigger written to it? check MEMORY_PRESSURE_WRITE)"
        case .waitFailed(let path, let code):
            "waiting for memory pressure on \(path) failed: \(Self.reason(code))"
        case .cannotStartThread(let code):
            "cannot start the memory pressure thread: \(Self.reason(code)) (too many threads or open files?)"
        }
    }

    private static func reason(_ code: Int32) -> String { String(cString: strerror(code)) }
}
