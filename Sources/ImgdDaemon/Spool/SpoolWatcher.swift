import ImgdCore
import Dispatch

#if canImport(Glibc)
import Glibc
#endif

/// Watches the spool folder with inotify and reports each name that may be a new link list.
///
/// - A regular file is reported when its writer closes it (`IN_CLOSE_WRITE`) or when it is
///   renamed into the folder (`IN_MOVED_TO`): never while it is still being written.
/// - Anything created in place that is not a regular file (a symlink, a FIFO, a socket, a
///   folder) is reported at once (`IN_CREATE`), so it can be refused with a reason; so is a
///   regular file with more than one link, a hard link placed with `ln`, which no close
///   follows.
/// - A regular file with one link that appears in place (`IN_CREATE`) was either made by
///   `open(O_CREAT)`, whose `IN_OPEN` the kernel queues in the same call (its close follows:
///   it is reported then), or placed by a link whose other name is already gone (`ln` then
///   `rm`, `linkat` of an `O_TMPFILE`), which nothing opens or closes here. So a created name
///   with no `IN_OPEN` after it when the queue is drained is looked at again
///   ``placedCheckDelay`` later, and reported if still unopened.
/// - Names starting with `.` or ending in `.tmp` or `.part` are the writers' own and never
///   reported; so are the spool's folders `done` and `failed`. Names are passed as bytes
///   (``SpoolEntryName``): one that is not valid UTF-8 is reported like any other.
/// - At start the watch is set first, then the folder is listed, so a file dropped in between
///   is reported (perhaps twice: the claimer ignores a name that is gone). After an inotify
///   queue overflow the folder is listed again.
///
/// Events are read on a Dispatch read source (epoll), on the watcher's serial queue, and passed
/// to `onName` there. The watcher is an actor on that queue (``QueueExecutor``): the source's
/// handler and the delayed looks run isolated to it, so its state is the actor's.
public actor SpoolWatcher {
    /// The spool folder.
    public nonisolated let folder: String
    private nonisolated let executor = QueueExecutor(label: "imgd.spool-watch")
    private nonisolated let onName: @Sendable (SpoolEntryName) -> Void
    private var source: DispatchSourceRead?
    /// Names created in place and not opened yet, and whether a look at them is due.
    private var created: (names: Set<SpoolEntryName>, checkDue: Bool, stopped: Bool) = ([], false, false)

    public nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

    /// How long after its `IN_CREATE` a regular file that nothing opened is taken as placed by
    /// a link (100 ms): far longer than the rest of the `open()` call that queues its `IN_OPEN`.
    static let placedCheckDelay = DispatchTimeInterval.milliseconds(100)

    /// A watcher of `folder`, calling `onName` for each candidate name.
    public init(folder: String, onName: @escaping @Sendable (SpoolEntryName) -> Void) {
        self.folder = folder
        self.onName = onName
    }

    /// Starts watching and lists what is already there.
    public func start() throws(SpoolError) {
        let fd = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard fd >= 0 else { throw .cannotWatch(path: folder, errno: errno) }
        let mask = UInt32(IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE | IN_OPEN | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR)
        guard inotify_add_watch(fd, folder, mask) >= 0 else {
            let code = errno
            close(fd)
            throw .cannotWatch(path: folder, errno: code)
        }
        // Its handlers run on the actor's queue, so isolated to it.
        let source = DispatchSource.makeReadSource(fileDescriptor: fd, queue: executor.queue)
        source.setEventHandler { @Sendable [self] in
            assumeIsolated { watcher in
                guard !watcher.created.stopped else { return }
                watcher.drain(fd)
            }
        }
        source.setCancelHandler { @Sendable in close(fd) }
        source.activate()
        self.source = source
        // Listed before `start` returns, so before the daemon says it is ready: a file created
        // after that (perhaps still being written) is reported only by its close or rename.
        rescan()
    }

    /// Stops watching; no `onName` call starts after this returns.
    public func stop() {
        // First: a look still due (or an event handler already queued) then neither reads the
        // descriptor (closed by the cancel handler, on the queue) nor reports.
        created.stopped = true
        source?.cancel()
        source = nil
    }

    private func drain(_ fd: Int32) {
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            guard count > 0 else { return }  // EAGAIN: drained
            var offset = 0
            while offset + MemoryLayout<inotify_event>.size <= count {
                let (mask, nameLength) = buffer.withUnsafeBytes { raw in
                    let event = raw.loadUnaligned(fromByteOffset: offset, as: inotify_event.self)
                    return (event.mask, Int(event.len))
                }
                let nameStart = offset + MemoryLayout<inotify_event>.size
                let nameBytes = buffer[nameStart..<(nameStart + nameLength)].prefix { $0 != 0 }
                offset = nameStart + nameLength
                if mask & UInt32(IN_Q_OVERFLOW) != 0 {
                    rescan()
                    continue
                }
                let name = SpoolEntryName(bytes: nameBytes)
                guard !nameBytes.isEmpty, !name.isIgnored else { continue }
                if mask & UInt32(IN_OPEN) != 0 {
                    // Opened: if it was just created, by its writer, whose close will come.
                    created.names.remove(name)
                    continue
                }
                if mask & UInt32(IN_CREATE) != 0 {
                    // At once what will never be closed after writing: anything but a regular
                    // file, and a hard link (`ln`) to one written elsewhere.
                    guard let info = status(of: name) else { continue }
                    if (info.st_mode & S_IFMT) == S_IFREG, info.st_nlink == 1 {
                        created.names.insert(name)
                        continue
                    }
                } else {
                    created.names.remove(name)
                }
                onName(name)
            }
            scheduleCreatedCheck(fd)
        }
    }

    /// Looks again, ``placedCheckDelay`` from now, at names created in place and not opened.
    private func scheduleCreatedCheck(_ fd: Int32) {
        guard !created.names.isEmpty, !created.checkDue else { return }
        created.checkDue = true
        executor.queue.asyncAfter(deadline: .now() + Self.placedCheckDelay) { @Sendable [self] in
            assumeIsolated { $0.lookAtCreated(fd) }
        }
    }

    /// The look ``scheduleCreatedCheck(_:)`` asked for: reports the names still unopened.
    private func lookAtCreated(_ fd: Int32) {
        guard !created.stopped else { return }
        let waited = created.names
        drain(fd)  // an `IN_OPEN` still in the queue clears its name first
        // Only the names that have waited the whole delay; newer ones get a look of their own.
        let placed = created.names.intersection(waited)
        created.names.subtract(placed)
        created.checkDue = false
        for name in placed.sorted(by: { $0.bytes.lexicographicallyPrecedes($1.bytes) }) { onName(name) }
        scheduleCreatedCheck(fd)
    }

    /// Reports every name in the folder now (at start, after an overflow, and when the spool
    /// opens its claims late: see `SpoolService.start()`).
    func rescan() {
        guard let handle = opendir(folder) else { return }
        defer { closedir(handle) }
        var names: [SpoolEntryName] = []
        while let entry = readdir(handle) {
            // The name's bytes as they are (not repaired into text: that would be another name).
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                SpoolEntryName(bytes: raw.prefix { $0 != 0 })
            }
            if !name.isIgnored { names.append(name) }  // `.` and `..` start with a dot
        }
        for name in names.sorted(by: { $0.bytes.lexicographicallyPrecedes($1.bytes) }) { onName(name) }
    }

    /// `lstat` of the entry `name` in the folder.
    private func status(of name: SpoolEntryName) -> stat? {
        var info = stat()
        let path = Array((folder + "/").utf8) + name.bytes + [0]
        let result = path.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { lstat($0.baseAddress!, &info) }
        }
        return result == 0 ? info : nil
    }
}

/// Why the spool cannot be used.
public enum SpoolError: Error, Sendable, Equatable, CustomStringConvertible {
    case cannotWatch(path: String, errno: Int32)
    case cannotCreate(path: String, errno: Int32)

    public var description: String {
        switch self {
        case .cannotWatch(let path, let code): "cannot watch the spool folder \(path): \(String(cString: strerror(code)))"
        case .cannotCreate(let path, let code): "cannot create the spool folder \(path): \(String(cString: strerror(code)))"
        }
    }
}
