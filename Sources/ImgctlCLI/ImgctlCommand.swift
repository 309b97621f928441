import ArgumentParser
import ImgdBase

/// `imgctl`: the command-line client of imgd's control socket (Protocol.md, "Control socket").
public struct ImgctlCommand: ParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "imgctl",
        abstract: "Talk to a running imgd over its control socket.",
        discussion: """
            The socket is --socket, else $IMGD_SOCKET, else ./imgd-data/imgd.sock when it \
            exists (a daemon started by hand in this folder), else /run/imgd/imgd.sock (the \
            packaged daemon; members of group imgd may connect). Every subcommand takes --json \
            to print the daemon's reply lines as they are.

            Exit status: 0 success; 1 the daemon answered an error (printed on stderr as \
            `imgctl: <code>: <message>`), or a URL was rejected, or a list failed, or fsck found \
            bad entries; 2 bad usage; 3 the daemon cannot be reached, or it closed the connection.
            """,
        version: ImgdVersion.string,
        subcommands: [
            StatusCommand.self, AddCommand.self, WarmCommand.self, GetCommand.self, EvictCommand.self,
            PurgeCommand.self, ListsCommand.self, CancelCommand.self, FailedCommand.self, RetryCommand.self, RefreshCommand.self,
            StatsCommand.self, WatchCommand.self, FsckCommand.self, ReloadCommand.self, ExplainCommand.self,
            WaitReadyCommand.self,
            UsageCommand.self,
            ExportCommand.self, ImportCommand.self, ManifestCommand.self,
        ])

    public init() {}

    /// `imgctl` without a subcommand is bad usage (exit 2), not a request for help.
    public func run() throws {
        throw ValidationError("Missing a subcommand.")
    }

    /// `imgctl --socket S --json status` as `imgctl status --socket S --json`: the options every
    /// subcommand takes may also come before its name, as docs/usage.md's synopsis writes them.
    static func connectionOptionsAfterSubcommand(_ arguments: [String]) -> [String] {
        var leading: [String] = []
        var rest = arguments[...]
        while let first = rest.first {
            if first == "--json" || first.hasPrefix("--socket=") {
                leading.append(first)
                rest = rest.dropFirst()
            } else if first == "--socket", rest.count >= 2 {
                leading += rest.prefix(2)
                rest = rest.dropFirst(2)
            } else {
                break
            }
        }
        guard !leading.isEmpty, let name = rest.first, !name.hasPrefix("-"), name != "help" else { return arguments }
        return [name] + leading + rest.dropFirst()
    }

    /// Parses `arguments` (without the program name), runs the subcommand against `context`,
    /// prints what the outcome calls for, and returns the exit status (see ``ImgctlExit``).
    public static func run(arguments: [String], context: ImgctlContext) -> Int32 {
        do {
            var command = try parseAsRoot(Self.connectionOptionsAfterSubcommand(arguments))
            if let subcommand = command as? any ImgctlSubcommand {
                try subcommand.execute(in: context)
            } else {
                try command.run()
            }
            return ImgctlExit.success
        } catch {
            let exit = ImgctlExit.forError(error)
            if let text = exit.standardOutput { context.standardOutput.line(text) }
            if let text = exit.standardError { context.standardError.line(text) }
            return exit.status
        }
    }
}
