import ImgdBase
import ImgdCore
import ImgdStore

#if canImport(Glibc)
import Glibc
#endif

/// Lists made by an `add` with a deadline (``AddedList``): the steps of a dropped list's claim
/// — its URLs recorded, then its file in `.claimed/`, then warmed — done on the spool's own
/// queue, not the claimer's (a long claim, a sitemap index waiting on its children, must not
/// hold up an `add`), and serialized there, so a member's bound is judged against every list
/// recorded before.
///
/// The file is written atomically and synced, with its folder, before the list is marked
/// claimed and the caller answered: after a kill or a power cut the state database has the
/// list `claiming` or `active` with its file in `.claimed/`, and the next start resumes it
/// (``resume()``); before that point the caller had no answer, and a `claiming` row without a
/// file is dropped.
extension SpoolService {
    /// Why an added list could not be made.
    enum AddedListFailure: Error {
        case stopping
        case overShare(pending: Int, share: Int)
        case state(SQLiteError)
        case file(errno: Int32)
    }

    /// Makes an `add` with a deadline a list, claimed like a dropped one: its record once its
    /// URLs are in the state database and its file in `.claimed/`.
    public func add(_ added: AddedList) throws(ControlError) -> ListRecord {
        do throws(AddedListFailure) {
            return try record(added)
        } catch {
            switch error {
            case .stopping:
                throw .shuttingDown
            case .overShare(let pending, let share):
                throw .other(
                    code: "queue_full",
                    message: "uid \(added.owner) has \(pending) URLs pending in its unfinished lists, and \(added.items.count) more would pass its share of max-queued (max-queued-share: \(share) URLs); nothing was added: try again once some have finished")
            case .state(let error):
                throw .stateUnavailable(what: "recording the added list", cause: "\(error)")
            case .file(let code):
                throw .stateUnavailable(what: "writing the added list's file in the spool's .claimed/", cause: String(cString: strerror(code)))
            }
        }
    }

    private func record(_ added: AddedList) throws(AddedListFailure) -> ListRecord {
        guard !stopping else { throw .stopping }
        if let share = added.ownerShare {
            let pending: Int
            do {
                pending = try store.pendingURLs(ownedBy: added.owner)
            } catch {
                throw .state(error)
            }
            guard pending + added.items.count <= share else { throw .overShare(pending: pending, share: share) }
        }
        let record: ListRecord
        do {
            record = try store.beginClaim(
                fileName: added.name, format: LinkListFormat.json.rawValue, pinMilliseconds: added.pinMilliseconds,
                at: WallClock.nowMilliseconds(), owner: added.owner)
        } catch {
            throw .state(error)
        }
        do throws(SQLiteError) {
            var lines = ListClaimer.ClaimLines(list: record.id, maxLines: Int.max)
            for (index, item) in added.items.enumerated() {
                switch item.item {
                case .url(let url, let options): _ = lines.add(line: index + 1, url: url.normalized, failure: nil, options: options)
                case .bad(let reason): _ = lines.add(line: index + 1, url: item.text, failure: (FailureCode.badURL.rawValue, reason))
                }
                if lines.isDue { try lines.record(in: store) }
            }
            try lines.record(in: store)
            if let refresh = added.refresh { try store.setRefresh(list: record.id, rule: refresh) }
            try store.setReadyBy(list: record.id, milliseconds: added.readyBy)
            try store.checkpoint()
        } catch {
            pruner.dropHalfMadeClaim(record)
            throw .state(error)
        }
        if let code = writeClaimedFile(record.claimedFile, added.file) {
            pruner.dropHalfMadeClaim(record)
            throw .file(errno: code)
        }
        do {
            try store.finishClaim(list: record.id)
        } catch {
            logger.forList(record.name).warning("cannot mark the list claimed in the state database, ignoring (it is warmed all the same): \(error)")
        }
        logger.forList(record.name).info(
            "list added by uid \(added.owner): \(ListClaimer.lines(added.items.count)), ready by \(URLExpiry.iso8601(milliseconds: added.readyBy))")
        onEvent(.listClaimed(name: record.name, total: added.items.count))
        // As the database has it now (its counts, its deadline); the record made at the claim's
        // start, with the deadline, if it cannot be read (the list is warmed all the same).
        var claimed = record
        claimed.readyBy = added.readyBy
        if let read = try? store.list(record.id) { claimed = read }
        self.claimed(claimed, cancelled: false)
        return claimed
    }

    /// Writes `bytes` as `.claimed/NAME`: a temporary name, synced, renamed, the folder synced.
    /// Returns the errno of a failure (nothing is left behind then), or nil.
    private func writeClaimedFile(_ name: String, _ bytes: [UInt8]) -> Int32? {
        let temporary = ".\(name).part"
        let fd = temporary.withCString { openat(folders.claimed, $0, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0o640) }
        guard fd >= 0 else { return errno }
        var failure: Int32?
        do {
            try writeAll(fd, bytes)
            if fsync(fd) != 0 { failure = errno }
        } catch {
            failure = error.errno
        }
        close(fd)
        if failure == nil, renameat(folders.claimed, temporary, folders.claimed, name) != 0 { failure = errno }
        guard failure == nil else {
            unlinkat(folders.claimed, temporary, 0)
            return failure
        }
        // The rename on disk before the list is claimed (a failure here is one the next start copes with).
        _ = fsync(folders.claimed)
        return nil
    }
}
