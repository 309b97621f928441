import Dispatch
import ImgdCore
import ImgdStore
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Claims the link lists dropped in the spool, one at a time, on its own serial queue: a long
/// claim holds up only the claims queued behind it, never the lists being warmed, `cancel`,
/// `lists` or a stop (which ``SpoolService`` serves on its own queue).
///
/// A claim opens the file with `O_NOFOLLOW` (a symlink, FIFO or folder is refused and moved to
/// `failed/` with a report saying why), streams its URLs into the state database
/// (``ListStore``) in slices, and only then moves it to `.claimed/` and hands the list to
/// `onClaimed`. A crash before the move leaves the file in the spool and the half-made claim is
/// dropped at the next start (``SpoolService``'s resume); after the move the list resumes.
///
/// `Sendable`: its only mutable state is the stop flag, an atomic; the claim itself runs on
/// `queue`.
final class ListClaimer: Sendable {
    /// Lines recorded in one transaction, at most.
    static let sliceLines = 5000

    private let folders: SpoolFolders
    private let store: ListStore
    private let reports: ListReportWriter
    private let log: DaemonLog
    private let onEvent: @Sendable (SpoolEvent) -> Void
    private let onClaimed: @Sendable (ListRecord) -> Void
    private let queue = DispatchQueue(label: "imgd.spool-claim")
    /// Set by ``stop()``: a claim in progress gives up between slices, and queued claims return.
    private let stopRequested = Atomic<Bool>(false)

    /// A claimer of the lists in `folders`, recording into `store`. `onClaimed` is called (on
    /// the claimer's queue) with each list once its file is in `.claimed/`.
    init(
        folders: SpoolFolders, store: ListStore, reports: ListReportWriter, log: DaemonLog,
        onEvent: @escaping @Sendable (SpoolEvent) -> Void, onClaimed: @escaping @Sendable (ListRecord) -> Void
    ) {
        self.folders = folders
        self.store = store
        self.reports = reports
        self.log = log
        self.onEvent = onEvent
        self.onClaimed = onClaimed
    }

    /// Queues the claim of the spool entry `name` (a name reported twice is claimed once: the
    /// second finds it gone).
    func claim(_ name: String) {
        queue.async { [self] in claimNow(name) }
    }

    /// Stops claiming: the claim in progress gives up (its file stays in the spool, to be claimed
    /// anew at the next start), and so do those queued. Returns once the queue is idle.
    func stop() {
        stopRequested.store(true, ordering: .relaxed)
        queue.sync {}
    }

    private var isStopping: Bool { stopRequested.load(ordering: .relaxed) }

    private func claimNow(_ name: String) {
        guard !isStopping, !SpoolWatcher.isIgnored(name) else { return }
        let fd = openat(folders.spool, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        if fd < 0 {
            switch errno {
            case ENOENT: return  // claimed already (a name can be reported twice) or removed
            case ELOOP: refuse(name, "it is a symbolic link; link lists must be regular files")
            case ENXIO: refuse(name, "it is a socket; link lists must be regular files")
            default: refuse(name, "it cannot be opened: \(String(cString: strerror(errno)))")
            }
            return
        }
        var info = stat()
        fstat(fd, &info)
        guard (info.st_mode & S_IFMT) == S_IFREG else {
            close(fd)
            refuse(name, "it is \(Self.kind(info.st_mode)); link lists must be regular files")
            return
        }
        let path = folders.path + "/" + name
        var reader: LinkListReader
        do {
            reader = try LinkListReader(fileDescriptor: fd, path: path)
        } catch {
            refuse(name, "\(error)")
            return
        }
        let record: ListRecord
        do {
            record = try store.beginClaim(
                fileName: name, format: reader.format.rawValue, pinMilliseconds: nil, at: WallClock.nowMilliseconds())
        } catch {
            log("cannot record list \(name), leaving it in the spool: \(error)", level: .error)
            return
        }
        var total = 0
        let complete: Bool
        do {
            complete = try recordLines(&reader, list: record.id, total: &total)
        } catch {
            log("cannot record list \(name), leaving it in the spool: \(error)", level: .error)
            try? store.abandonClaim(list: record.id)
            return
        }
        guard complete else {
            // Stopping: the file stays in the spool; the next start drops the half-made claim
            // (see `SpoolService.resume()`) and claims the file anew.
            log("stopping: list \(name) left in the spool, to be claimed at the next start")
            return
        }
        guard folders.move(name, from: folders.spool, to: folders.claimed, as: record.claimedFile) != nil else {
            log("cannot move list \(name) to .claimed/: \(String(cString: strerror(errno))); leaving it", level: .error)
            try? store.abandonClaim(list: record.id)
            return
        }
        try? store.finishClaim(list: record.id)
        log("claimed list \(record.name): \(total) lines")
        onEvent(.listClaimed(name: record.name, total: total))
        guard let claimed = try? store.list(record.id) else { return }
        onClaimed(claimed)
    }

    /// Streams the list's lines into the database in slices; a list that breaks its syntax part
    /// way keeps what came before, plus a `bad_list` line saying where and why. Returns false
    /// when it gave up part way because the spool is stopping.
    private func recordLines(_ reader: inout LinkListReader, list: Int, total: inout Int) throws(SQLiteError) -> Bool {
        var slice: [(seq: Int, line: Int, url: String, failure: (code: String, message: String)?)] = []
        var seq = 0
        var pinRead = false
        while true {
            let entry: LinkListEntry?
            do {
                entry = try reader.next()
            } catch {
                seq += 1
                let line: Int = if case .malformed(_, let line, _) = error { line } else { 0 }
                slice.append((seq, line, "", ("bad_list", "\(error)")))
                break
            }
            if !pinRead {
                pinRead = true
                if let pin = reader.pin { try store.setPin(list: list, milliseconds: Int(pin.components.seconds) * 1000) }
            }
            guard let entry else { break }
            seq += 1
            switch entry.url {
            case .success(let url): slice.append((seq, entry.line, url.normalized, nil))
            case .failure(let error): slice.append((seq, entry.line, entry.text, ("bad_url", "\(error)")))
            }
            if slice.count >= Self.sliceLines {
                try store.addLines(list: list, slice)
                slice.removeAll(keepingCapacity: true)
                if isStopping { return false }
            }
        }
        try store.addLines(list: list, slice)
        total = seq
        return true
    }

    /// Moves a file that cannot be a list to `failed/`, with a report saying why.
    private func refuse(_ name: String, _ reason: String) {
        log("refused \(name) in the spool: \(reason)", level: .warning)
        let moved = folders.move(name, from: folders.spool, to: folders.failed, as: name) ?? name
        reports.write(["name": name, "state": "refused", "reason": reason], as: moved)
        onEvent(.refused(name: name, reason: reason))
    }

    private static func kind(_ mode: mode_t) -> String {
        switch mode & S_IFMT {
        case S_IFDIR: "a folder"
        case S_IFIFO: "a FIFO"
        case S_IFSOCK: "a socket"
        case S_IFCHR, S_IFBLK: "a device"
        default: "not a regular file"
        }
    }
}
