import ArgumentParser
import ImgdCore
import ImgdStore

/// `imgd fsck`: verify every cache entry and drop the bad ones.
struct FsckCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fsck",
        abstract: "Verify every cache entry (size and SHA-256); remove bad entries and files with no entry.",
        discussion: """
            Each bad entry is reported on stderr with its URL and what is wrong; a summary goes to \
            stdout. Takes the cache's lock, so it refuses to run beside an imgd using the same \
            cache. Exit status: 0 when nothing was bad, 1 when bad entries were found and removed \
            (or the check could not run), 2 on bad usage.
            """)

    @Option(help: "The cache folder.")
    var cache: String = "./imgd-data/cache"

    func run() async throws {
        let console = Console()
        let disk: DiskCache
        do {
            disk = try DiskCache(root: cache)
        } catch {
            console.message("imgd: \(error)")
            throw ExitCode(1)
        }
        let report: CacheCheckReport
        do {
            report = try disk.checkAll { entry, problem in
                console.message("imgd: bad: \(EchoedText.cut(entry.url)): \(problem)")
            }
            try disk.close()
        } catch {
            console.message("imgd: the check stopped: \(error)")
            throw ExitCode(1)
        }
        console.output(
            "imgd: checked \(report.checked) entries: \(report.bad) bad, \(report.removed) removed; "
                + "\(report.orphanFiles) files without an entry removed")
        if report.bad > 0 { throw ExitCode(1) }
    }
}
