import ArgumentParser

/// `imgctl purge --memory|--disk`: empty a tier.
struct PurgeCommand: ImgctlSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "purge",
        abstract: "Empty the memory tier (--memory) or the disk cache (--disk; pinned images stay).",
        usage: "imgctl purge (--memory | --disk) [--socket <path>] [--json]")

    /// The tiers `purge` can empty.
    enum Tier: String {
        case memory, disk
    }

    @OptionGroup var connection: ConnectionOptions

    @Flag(help: "Empty the memory tier (counts as a memory-pressure event).")
    var memory = false

    @Flag(help: "Evict every unpinned image from the disk cache.")
    var disk = false

    /// Two flags rather than one enumerable flag: the usage line reads better, and "exactly
    /// one" is checked here with a message that says so.
    func validate() throws {
        guard memory != disk else { throw ValidationError("Give exactly one of --memory and --disk.") }
    }

    var tier: Tier { memory ? .memory : .disk }

    func execute(in context: ImgctlContext) throws(ImgctlError) {
        let session = try ControlSession(connection, context: context)
        let result = try session.call("purge", ["tier": .string(tier.rawValue)])
        guard !session.json else { return }
        switch tier {
        case .memory:
            session.output("purged \(HumanFormat.size(result["purged_bytes"]?.intValue ?? 0)) from memory")
        case .disk:
            let evicted = result["evicted"]?.intValue ?? 0
            session.output(
                "evicted \(HumanFormat.count(evicted)) entr\(evicted == 1 ? "y" : "ies") "
                    + "(\(HumanFormat.size(result["bytes"]?.intValue ?? 0))) from disk")
        }
    }
}
