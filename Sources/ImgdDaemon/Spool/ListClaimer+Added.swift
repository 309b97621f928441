import ImgdCore
import ImgdStore

#if canImport(Glibc)
import Glibc
#endif

/// Claiming an `add` with a deadline (``AddedList``): the same steps as a dropped list's — its
/// URLs recorded in slices, then its file in `.claimed/`, then handed to the spool — with the
/// file written by the daemon from the `add` instead of moved from the spool.
extension ListClaimer {
    /// Why an added list could not be made.
    enum AddedListFailure: Error {
        case stopping
        case state(SQLiteError)
        case file(errno: Int32)
    }

    /// Records `added` and hands it to the spool; its record as claimed.
    func claim(_ added: AddedList) throws(AddedListFailure) -> ListRecord {
        guard !isStopping else { throw .stopping }
        let record: ListRecord
        do {
            record = try store.beginClaim(
                fileName: added.name, format: LinkListFormat.json.rawValue, pinMilliseconds: added.pinMilliseconds,
                at: WallClock.nowMilliseconds(), owner: added.owner)
        } catch {
            throw .state(error)
        }
        do throws(SQLiteError) {
            var lines = ClaimLines(list: record.id, maxLines: Int.max)
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
            abandon(record)
            throw .state(error)
        }
        // Written where only the daemon writes, under the name the claim chose: nothing to race.
        let fd = record.claimedFile.withCString { openat(folders.claimed, $0, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o640) }
        guard fd >= 0 else {
            let code = errno
            abandon(record)
            throw .file(errno: code)
        }
        do {
            try writeAll(fd, added.file)
            close(fd)
        } catch {
            close(fd)
            unlinkat(folders.claimed, record.claimedFile, 0)
            abandon(record)
            throw .file(errno: error.errno)
        }
        do {
            try store.finishClaim(list: record.id)
        } catch {
            logger.forList(record.name).warning("cannot mark the list claimed in the state database, ignoring (it is warmed all the same): \(error)")
        }
        logger.forList(record.name).info("list added by uid \(added.owner): \(Self.lines(added.items.count)), ready by \(URLExpiry.iso8601(milliseconds: added.readyBy))")
        onEvent(.listClaimed(name: record.name, total: added.items.count))
        handOver(record, cancelled: false)
        var claimed = record
        claimed.readyBy = added.readyBy
        return claimed
    }
}
