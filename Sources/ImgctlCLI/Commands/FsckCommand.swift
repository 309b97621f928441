import ArgumentParser

/// `imgctl fsck`: the running daemon verifies every entry of its disk cache (size and SHA-256)
/// and drops the bad ones, which are fetched again when next asked for.
struct FsckCommand: ImgctlSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "fsck",
        abstract: "Verify every cached image (size and SHA-256); bad ones are removed (exit 1 if any).",
        discussion: """
            The daemon reads the whole cache, so this takes as long as reading it from disk; \
            lookups and downloads go on meanwhile. Exits 0 when every entry was intact, 1 when \
            bad entries were found and removed (like `imgd fsck`, which checks a cache no daemon \
            is using, and also removes files that have no index row).
            """)

    @OptionGroup var connection: ConnectionOptions

    func execute(in context: ImgctlContext) throws(ImgctlError) {
        let session = try ControlSession(connection, context: context)
        let result = try session.call("fsck")
        let bad = result["bad"]?.intValue ?? 0
        if !session.json {
            let checked = result["checked"]?.intValue ?? 0
            let removed = result["removed"]?.intValue ?? 0
            session.output("checked \(HumanFormat.count(checked)) entries: \(HumanFormat.count(bad)) bad, \(HumanFormat.count(removed)) removed")
        }
        if bad > 0 { throw .reported(status: ImgctlExit.failure) }
    }
}
