import Dispatch
import ImgdCore
import ImgdNetwork
import ImgdStore
import Logging

#if canImport(Glibc)
import Glibc
#endif

/// Taking over claimed lists: those a previous run left (resumed at start), and each one the
/// claimer hands over.
extension SpoolService {
    func resume() {
        let records: [ListRecord]
        do {
            records = try store.lists(finishedLimit: 0)
        } catch {
            // Resumed by the retry pass (SpoolService+StateTrouble), before it pumps.
            stateTrouble.resumeMissed = true
            stateFailed("reading the lists claimed before the last stop from the state database", error)
            return
        }
        stateTrouble.resumeMissed = false
        // In claim order (`lists` reads the most recent first): the first ones claimed start,
        // up to the cap, and the rest wait their turn as they did before the stop.
        for record in records.sorted(by: { $0.id < $1.id }) {
            switch record.state {
            case .claiming:
                var info = stat()
                if fstatat(folders.claimed, record.claimedFile, &info, AT_SYMLINK_NOFOLLOW) == 0 {
                    // Killed between the move's link and its unlink: the spool still has the
                    // file under its dropped name, which would be refused as a hard link.
                    if info.st_nlink > 1 { removeSpoolLinks(to: info) }
                    do {
                        try store.finishClaim(list: record.id)
                    } catch {
                        // Harmless: it is warmed all the same, and its finish records its state.
                        logger.forList(record.name).warning(
                            "cannot mark the list claimed in the state database, ignoring (it is warmed all the same): \(error)")
                    }
                    admit(record)
                } else {
                    // Crashed while recording: the file is still in the spool; claim it anew.
                    do {
                        try store.abandonClaim(list: record.id)
                    } catch {
                        // Harmless: the half-made claim is looked at again at the next start.
                        logger.forList(record.name).warning(
                            "cannot drop the list's half-made claim from the state database, ignoring (the next start drops it): \(error)")
                    }
                }
            case .active:
                admit(record)
            default:
                break
            }
        }
        let waitingCount = turns.withLock(\.waiting.count)
        if !runs.isEmpty {
            logger.info("resuming \(runs.count + waitingCount) list(s) claimed before the last stop, \(waitingCount) of them waiting for a turn")
        }
        pump()
    }

    /// Removes the names in the spool folder itself that are `file` (same device and inode):
    /// what a claim's move to `.claimed/` left when a kill came between its link and its unlink.
    func removeSpoolLinks(to file: stat) {
        guard let handle = opendir(folders.path) else { return }
        defer { closedir(handle) }
        var names: [SpoolEntryName] = []
        while let entry = readdir(handle) {
            // The name's bytes as they are: a name that is not UTF-8 is still a name.
            names.append(withUnsafeBytes(of: entry.pointee.d_name) { SpoolEntryName(bytes: $0.prefix { $0 != 0 }) })
        }
        for name in names {
            var info = stat()
            guard name.withCString({ fstatat(folders.spool, $0, &info, AT_SYMLINK_NOFOLLOW) }) == 0,
                (info.st_mode & S_IFMT) == S_IFREG, info.st_dev == file.st_dev, info.st_ino == file.st_ino
            else { continue }
            _ = name.withCString { unlinkat(folders.spool, $0, 0) }
            logger.forList(name.display).info(
                "list removed from the spool: a claim that a kill interrupted had moved it to .claimed/ already")
        }
    }

    /// On the queue: a list the claimer has moved to `.claimed/` starts warming or waits its
    /// turn, or, when it was cancelled while being claimed, finishes at once.
    func claimed(_ record: ListRecord, cancelled: Bool) {
        guard !stopping else { return }  // active in the database: it resumes at the next start
        if cancelled {
            startRun(record, cancelled: true)
        } else {
            admit(record)
        }
        pump()
    }
}

