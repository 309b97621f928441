#if canImport(Glibc)
import Glibc
#endif
import ImgdCore

/// A ``MemoryPressureSource`` opened: the descriptor to poll and how to read it, or the file
/// to poll on a timer. Made on the task calling ``MemoryPressureMonitor/run(onWatching:)`` (so opening
/// errors are thrown there), then owned by the monitor's thread, which closes it.
struct PressureWatch: Sendable {
    /// How events are recognised.
    enum Mode: Sendable {
        /// Nothing to watch.
        case disabled
        /// A PSI file with a trigger registered: `POLLPRI` is an event.
        case priority(descriptor: Int32)
        /// A FIFO: data to read is an event.
        case fifo(descriptor: Int32)
        /// A connected Unix socket: data to read is an event; end of file ends the watch.
        case socket(descriptor: Int32)
        /// No descriptor: read the file every `interval`.
        case polling(threshold: Double, interval: Duration)
    }

    /// The source in use: the one asked for, or ``MemoryPressureSource/psiPolling(path:threshold:interval:)``
    /// when the kernel refused its trigger.
    let source: MemoryPressureSource
    let mode: Mode
    /// The path watched, for messages.
    let path: String
    /// ``MemoryPressureEvent/origin`` of the events this watch reports.
    let origin: String
    /// Set when this watch polls because the kernel refused the PSI trigger asked for.
    var refusal: MemoryPressureWatching.Refusal?

    /// The descriptor it holds open, if any.
    var descriptors: [Int32] {
        switch mode {
        case .priority(let descriptor), .fifo(let descriptor), .socket(let descriptor): [descriptor]
        case .disabled, .polling: []
        }
    }

    /// Closes what ``open(_:pollingThreshold:pollingInterval:)`` opened.
    func close() {
        for descriptor in descriptors { Glibc.close(descriptor) }
    }

    /// Opens `source`. A refused PSI trigger becomes polling with `pollingThreshold` and
    /// `pollingInterval`.
    static func open(
        _ source: MemoryPressureSource, pollingThreshold: Double, pollingInterval: Duration
    ) throws(MemoryPressureError) -> PressureWatch {
        switch source {
        case .disabled:
            return PressureWatch(source: source, mode: .disabled, path: "", origin: "")

        case .systemdWatch(let path, .psiFile, let write):
            // Read-only when there is nothing to write, as systemd does: the file may not be
            // writable by us, and then it needs not be.
            let access = write.isEmpty ? O_RDONLY : O_RDWR
            let descriptor = try openDescriptor(path, access | O_NONBLOCK | O_CLOEXEC)
            try writeOrClose(descriptor, write, path: path)
            return PressureWatch(source: source, mode: .priority(descriptor: descriptor), path: path, origin: "systemd")

        case .systemdWatch(let path, .fifo, let write):
            // Read-write so that open does not wait for a writer, and so that the FIFO never
            // reports hang-up (which would make poll return at once, forever) when a writer
            // closes: we are a writer too. Bytes we write here are read back by us as an event
            // unless the other side reads them first; systemd sets MEMORY_PRESSURE_WRITE only
            // for PSI files, so in practice there are none.
            let descriptor = try openDescriptor(path, O_RDWR | O_NONBLOCK | O_CLOEXEC)
            try writeOrClose(descriptor, write, path: path)
            return PressureWatch(source: source, mode: .fifo(descriptor: descriptor), path: path, origin: "systemd")

        case .systemdWatch(let path, .socket, let write):
            let type = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
            let descriptor = socket(AF_UNIX, type, 0)
            guard descriptor >= 0 else { throw .cannotConnect(path: path, errno: errno) }
            // Blocking while connecting and writing (a local socket answers at once), then
            // non-blocking, so draining stops when nothing is left.
            let failure = (try? UnixSocketAddress(path: path))?.connect(descriptor) ?? ENAMETOOLONG
            guard failure == 0 else {
                Glibc.close(descriptor)
                throw .cannotConnect(path: path, errno: failure)
            }
            try writeOrClose(descriptor, write, path: path)
            _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)
            return PressureWatch(source: source, mode: .socket(descriptor: descriptor), path: path, origin: "systemd")

        case .psiTrigger(let path, let trigger):
            let descriptor = Glibc.open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC)
            if descriptor < 0 {
                let code = errno
                guard isRefusal(code) else { throw .cannotOpen(path: path, errno: code) }
                var watch = try polling(path, threshold: pollingThreshold, interval: pollingInterval)
                watch.refusal = .init(trigger: trigger, errno: code)
                return watch
            }
            // The kernel overwrites the last byte written with a NUL before parsing, so the
            // trigger is sent NUL-terminated, as systemd and the kernel's example do.
            // One write(2) of these few bytes: a PSI file takes a trigger only whole.
            var failure: Int32 = 0
            do throws(WriteError) {
                try writeAll(descriptor, Array(trigger.utf8) + [0])
            } catch {
                failure = error.errno
            }
            guard failure == 0 else {
                Glibc.close(descriptor)
                guard isRefusal(failure) else { throw .cannotWrite(path: path, errno: failure) }
                var watch = try polling(path, threshold: pollingThreshold, interval: pollingInterval)
                watch.refusal = .init(trigger: trigger, errno: failure)
                return watch
            }
            return PressureWatch(source: source, mode: .priority(descriptor: descriptor), path: path, origin: "psi")

        case .psiPolling(let path, let threshold, let interval):
            return try polling(path, threshold: threshold, interval: interval)
        }
    }

    /// A polling watch of `path`, after checking it can be read and is a PSI file, so a wrong
    /// path fails at start rather than silently reporting nothing.
    private static func polling(_ path: String, threshold: Double, interval: Duration) throws(MemoryPressureError) -> PressureWatch {
        precondition(interval > .zero, "a polling interval must be positive")
        guard try PSIAverage.read(path) != nil else { throw .notAPressureFile(path: path) }
        return PressureWatch(
            source: .psiPolling(path: path, threshold: threshold, interval: interval),
            mode: .polling(threshold: threshold, interval: interval), path: path, origin: "avg10")
    }

    /// How a kernel says "not from you" to a PSI trigger: EINVAL (a window too short for an
    /// unprivileged process, or an old kernel), EPERM/EACCES (no permission), EROFS.
    private static func isRefusal(_ code: Int32) -> Bool {
        code == EINVAL || code == EPERM || code == EACCES || code == EROFS
    }

    private static func openDescriptor(_ path: String, _ flags: Int32) throws(MemoryPressureError) -> Int32 {
        let descriptor = Glibc.open(path, flags)
        guard descriptor >= 0 else { throw .cannotOpen(path: path, errno: errno) }
        return descriptor
    }

    private static func writeOrClose(_ descriptor: Int32, _ bytes: [UInt8], path: String) throws(MemoryPressureError) {
        guard !bytes.isEmpty else { return }
        do throws(WriteError) {
            try writeAll(descriptor, bytes)
        } catch {
            Glibc.close(descriptor)
            throw .cannotWrite(path: path, errno: error.errno)
        }
    }
}
