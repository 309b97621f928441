import Dispatch
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Watches the spool folder with inotify and reports each name that may be a new link list.
///
/// - A regular file is reported when its writer closes it (`IN_CLOSE_WRITE`) or when it is
///   renamed into the folder (`IN_MOVED_TO`): never while it is still being written.
/// - Anything created in place that is not a regular file (a symlink, a FIFO, a socket, a
///   folder) is reported at once (`IN_CREATE`), so it can be refused with a reason; a regular
///   file's `IN_CREATE` is ignored (its close follows).
/// - Names starting with `.` or ending in `.tmp` or `.part` are the writers' own and never
///   reported; so are the spool's folders `done` and `failed`.
/// - At start the watch is set first, then the folder is listed, so a file dropped in between
///   is reported (perhaps twice: the claimer ignores a name that is gone). After an inotify
///   queue overflow the folder is listed again.
///
/// Events are read on a Dispatch read source (epoll), on the watcher's serial queue, and passed
/// to `onName` there.
public final class SpoolWatcher: Sendable {
    /// The spool folder.
    public let folder: String
    private let queue = DispatchQueue(label: "imgd.spool-watch")
    private let onName: @Sendable (String) -> Void
    private let source: Mutex<DispatchSourceRead?> = Mutex(nil)

    /// A watcher of `folder`, calling `onName` for each candidate name.
    public init(folder: String, onName: @escaping @Sendable (String) -> Void) {
        self.folder = folder
        self.onName = onName
    }

    /// Starts watching and lists what is already there.
    public func start() throws(SpoolError) {
        let fd = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard fd >= 0 else { throw .cannotWatch(path: folder, errno: errno) }
        let mask = UInt32(IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR)
        guard inotify_add_watch(fd, folder, mask) >= 0 else {
            let code = errno
            close(fd)
            throw .cannotWatch(path: folder, errno: code)
        }
        let queue = queue
        // Made inside the lock: a Dispatch source is not Sendable, so it cannot be handed in.
        self.source.withLock { slot in
            let source = DispatchSource.makeReadSource(fileDescriptor: fd, queue: queue)
            source.setEventHandler { [self] in drain(fd) }
            source.setCancelHandler { close(fd) }
            source.activate()
            slot = source
        }
        // Listed before `start` returns, so before the daemon says it is ready: a file created
        // after that (perhaps still being written) is reported only by its close or rename.
        queue.sync { rescan() }
    }

    /// Stops watching; no `onName` call starts after this returns.
    public func stop() {
        source.withLock { source in
            source?.cancel()
            source = nil
        }
        queue.sync {}
    }

    /// True for a name a writer may still be using, or one of the spool's own.
    public static func isIgnored(_ name: String) -> Bool {
        name.hasPrefix(".") || name.hasSuffix(".tmp") || name.hasSuffix(".part") || name == "done" || name == "failed"
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
                guard !nameBytes.isEmpty, let name = String(validating: nameBytes, as: UTF8.self), !Self.isIgnored(name)
                else { continue }
                if mask & UInt32(IN_CREATE) != 0 {
                    // Only what can never be closed after writing: a regular file will be.
                    var info = stat()
                    guard lstat(folder + "/" + name, &info) == 0, (info.st_mode & S_IFMT) != S_IFREG else { continue }
                }
                onName(name)
            }
        }
    }

    private func rescan() {
        guard let handle = opendir(folder) else { return }
        defer { closedir(handle) }
        var names: [String] = []
        while let entry = readdir(handle) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(cString: raw.bindMemory(to: CChar.self).baseAddress!)
            }
            if name != ".", name != "..", !Self.isIgnored(name) { names.append(name) }
        }
        for name in names.sorted() { onName(name) }
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
