import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Writes a list's report, `NAME.report.json`, beside its file in `done/` or `failed/`: under a
/// temporary name first, then renamed, so a report is never seen half-written.
struct ListReportWriter: Sendable {
    let folders: SpoolFolders
    let log: DaemonLog

    /// Writes `report` as `NAME.report.json` in `folder` (`failed/` by default).
    func write(_ report: [String: Any], as name: String, in folder: Int32? = nil) {
        let folder = folder ?? folders.failed
        guard let data = try? JSONSerialization.data(withJSONObject: report, options: [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes])
        else { return }
        let temp = ".\(name).report.json.tmp"
        let fd = openat(folder, temp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0o640)
        guard fd >= 0 else {
            log("cannot write the report of \(name): \(String(cString: strerror(errno)))", level: .error)
            return
        }
        let complete = data.withUnsafeBytes { raw in Glibc.write(fd, raw.baseAddress, raw.count) == raw.count }
        close(fd)
        guard complete, renameat(folder, temp, folder, name + ".report.json") == 0 else {
            log("cannot write the report of \(name): \(String(cString: strerror(errno)))", level: .error)
            unlinkat(folder, temp, 0)
            return
        }
    }
}
