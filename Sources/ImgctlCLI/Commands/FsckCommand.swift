import ArgumentParser

/// `imgctl fsck`: not a socket command. The check needs the cache to itself (it takes the
/// cache's lock), so it runs offline as `imgd fsck`; this subcommand exists so that people who
/// look for it here are told where it is, and exits 2 like any other misuse.
struct FsckCommand: ImgctlSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "fsck",
        abstract: "Not available over the socket: explains how to run `imgd fsck` (exits 2).",
        discussion: """
            The cache check takes the cache's lock, so it cannot run beside a live imgd. Stop the \
            daemon (systemctl stop imgd), then run: imgd fsck --cache DIR (the packaged daemon's \
            cache is /var/cache/imgd; a daemon started by hand uses ./imgd-data/cache).
            """)

    @OptionGroup var connection: ConnectionOptions

    func execute(in context: ImgctlContext) throws(ImgctlError) {
        context.standardError.line(Self.guidance)
        throw .reported(status: ImgctlExit.usage)
    }

    static let guidance = """
        imgctl: fsck does not run over the control socket: it needs the cache to itself.
        Stop imgd (systemctl stop imgd), then run: imgd fsck --cache DIR
        (DIR: /var/cache/imgd for the packaged daemon, ./imgd-data/cache for one started by hand)
        """
}
