import Dispatch
import ImgdCore
import ImgdNetwork
import ImgdStore
import Logging

#if canImport(Glibc)
import Glibc
#endif

/// Finishing: a list with nothing pending gets its report and its file moves to `done/` or
/// `failed/`; the next waiting list starts.
extension SpoolService {
    func finishIfDone(_ id: Int) {
        guard let run = runs[id], run.exhausted, run.outstanding == 0, !stopping else { return }
        flush()
        // A step the state database refuses is taken again by the retry pass, which calls this
        // again (SpoolService+StateTrouble): each step below may be repeated.
        var record: ListRecord
        do {
            guard let read = try store.list(id) else { return }
            record = read
        } catch {
            stateFailed("reading the list from the state database", error, list: run.name)
            return
        }
        if run.cancelled, record.pending > 0, outcomes.isEmpty {
            // Cancelled while the state database failed (the cancel could not fail them then).
            do {
                _ = try store.failPending(list: id, code: FailureCode.cancelled.rawValue, message: "the list was cancelled")
                record = try store.list(id) ?? record
            } catch {
                stateFailed("failing the URLs of the cancelled list in the state database", error, list: record.name)
                return
            }
        }
        guard record.pending == 0 else {
            // Outcomes not recorded yet (a write failed): the retry pass looks again.
            return
        }
        // Decided once: a finish tried again after a failure writes the same state, time and
        // folder (a report already read is not rewritten with another `finished_at`).
        let decided = run.finishing ?? (run.cancelled ? .cancelled : (record.failed > 0 ? .failed : .done), WallClock.nowMilliseconds())
        runs[id]!.finishing = decided
        record.state = decided.state
        record.finishedAt = decided.at
        let destination = record.state == .done ? folders.done : folders.failed
        // Named after the list, within NAME_MAX with its report's suffix (a long name is
        // shortened), numbered when a finished list has that name there. The name is recorded
        // before the move: after a kill between the move and the report, the file is no longer
        // in `.claimed/`, and the report must go beside this list's file, not replace the
        // report of the list that has the unnumbered name. (`retry` forgets the name a list
        // had: it finishes again under the first free one.)
        let fileName: String
        if let chosen = record.finishedFile {
            fileName = chosen
        } else {
            fileName = folders.freeName(for: SpoolEntryName.fileName(for: record.name), in: destination)
            do {
                try store.setFinishedFile(list: id, file: fileName)
            } catch {
                stateFailed("recording where the list goes in the state database", error, list: record.name)
                return
            }
        }
        // Moved already when this is a retry: the name it has there.
        let moved = folders.move(record.claimedFile, from: folders.claimed, to: destination, as: fileName) ?? fileName
        do {
            try reports.writeReport(for: record, as: moved, in: destination)
            try store.finish(list: id, state: record.state, at: record.finishedAt!, file: moved)
        } catch {
            stateFailed("finishing the list in the state database", error, list: record.name)
            return
        }
        // Lists beyond the kept ones leave the database, off this queue.
        pruner.schedule()
        runs[id] = nil
        stopFollowingDeadline(of: run)
        if run.tookTurn { turns.withLock { $0.warmed -= 1 } }
        if run.paused {
            turns.withLock { _ = $0.paused.remove(id) }
            downloader.hold(run.submitter, false)
        }
        logger.forList(record.name).info(
            "list \(record.state.rawValue): \(record.cached) cached, \(record.alreadyCached) already cached, \(record.failed) failed")
        onEvent(.listDone(record))
        // Its turn goes to the list that has waited longest.
        startWaiting()
    }
}
