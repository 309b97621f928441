#if canImport(Glibc)
import Glibc
#endif
import ImgdCore

extension ListClaimer {
    /// Why a spool entry is not taken as a list, from its `lstat`.
    ///
    /// Entries a member can drop but no list may be: a FIFO (a reader blocks on it: `cat
    /// failed/*` would hang), a symlink (to `/etc/shadow`), a socket, a device, and a regular
    /// file with more than one link (a hard link to a file its dropper may not be able to read,
    /// made readable to the group through the spool). They are never moved anywhere: they are
    /// unlinked from the spool (the name only; what a link points to is untouched) and reported.
    /// A folder is left where it is (removing a tree is not the daemon's job) and reported once
    /// per run.
    enum Refusal: Equatable {
        case folder
        case notRegular(kind: String)
        case hardLink(links: Int)

        /// nil for a regular file with one link: a list.
        init?(_ info: stat) {
            switch info.st_mode & S_IFMT {
            case S_IFREG:
                guard info.st_nlink > 1 else { return nil }
                self = .hardLink(links: Int(info.st_nlink))
            case S_IFDIR: self = .folder
            case S_IFLNK: self = .notRegular(kind: "a symbolic link")
            case S_IFIFO: self = .notRegular(kind: "a FIFO")
            case S_IFSOCK: self = .notRegular(kind: "a socket")
            case S_IFCHR, S_IFBLK: self = .notRegular(kind: "a device")
            default: self = .notRegular(kind: "not a regular file")
            }
        }

        /// The report's `reason`.
        var reason: String {
            switch self {
            case .folder:
                "it is a folder; link lists must be regular files (left in place: remove it)"
            case .notRegular(let kind):
                "it is \(kind); link lists must be regular files (removed from the spool)"
            case .hardLink(let links):
                "it has \(links) links (a hard link); a link list must have one, so that no list exposes "
                    + "a file its dropper cannot read (removed from the spool, the file itself untouched)"
            }
        }
    }

    /// Refuses an entry that is not a list: unlinked (a folder: left, and reported once per run),
    /// with `NAME.report.json` in `failed/` saying why.
    func refuse(_ entry: SpoolEntryName, _ refusal: Refusal) {
        let name = entry.display
        var reason = refusal.reason
        if refusal == .folder {
            guard reportedFolders.insert(entry).inserted else { return }
        } else if entry.withCString({ unlinkat(folders.spool, $0, 0) }) != 0, errno != ENOENT {
            reason += "; but it could not be removed: \(String(cString: strerror(errno)))"
        }
        logger.forList(name).warning("list refused in the spool: \(reason)")
        reports.writeRefusal(name: name, reason: reason, code: nil, as: freeReportName(for: name))
        onEvent(.refused(name: name, reason: reason))
    }

    /// Refuses a regular file that cannot be read as a list (or is too large): moved to
    /// `failed/` (a regular file there harms no reader), with a report saying why (and `code`,
    /// the failure code, when there is one).
    /// `target`: its name in `failed/` (by default the dropped name, shortened when long).
    func refuse(_ entry: SpoolEntryName, movingItBecause reason: String, code: String? = nil, as target: String? = nil) {
        let name = entry.display
        logger.forList(name).warning("list refused in the spool: \(reason)")
        let target = target ?? SpoolEntryName.fileName(for: name)
        let moved = folders.move(entry, from: folders.spool, to: folders.failed, as: target) ?? freeReportName(for: name)
        reports.writeRefusal(name: name, reason: reason, code: code, as: moved)
        onEvent(.refused(name: name, reason: reason))
    }

    /// Reports a list whose name was given to something else (`kind`) while it was being
    /// claimed: what the name held by then was moved into `.claimed/`, found not to be the file
    /// read, and removed; the claim was dropped. The file read is wherever its dropper put it.
    func refuseReplaced(name: String, by kind: String) {
        let reason = "it was replaced while being claimed (by \(kind)); the claim was dropped and what replaced it removed "
            + "(drop the list again, and leave it in place until it is claimed)"
        logger.forList(name).warning("list refused in the spool: \(reason)")
        reports.writeRefusal(name: name, reason: reason, code: FailureCode.badList.rawValue, as: freeReportName(for: name))
        onEvent(.refused(name: name, reason: reason))
    }

    /// A name in `failed/` for the report of `name` (`NAME.report.json`) that neither an earlier
    /// report nor a list there has: `name`, then `stem.2.ext`, … (within NAME_MAX).
    private func freeReportName(for name: String) -> String {
        let base = SpoolEntryName.fileName(for: name)
        let failed = folders.failed
        var info = stat()
        for attempt in 1..<1000 {
            let candidate = attempt == 1 ? base : SpoolFolders.numbered(base, attempt)
            if fstatat(failed, candidate + ".report.json", &info, AT_SYMLINK_NOFOLLOW) != 0,
                fstatat(failed, candidate, &info, AT_SYMLINK_NOFOLLOW) != 0
            {
                return candidate
            }
        }
        return base
    }
}
