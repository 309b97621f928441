import ArgumentParser
import ImgdCore

/// `imgd`: the root command.
public struct IMGDCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "imgd",
        abstract: "Keep the images your machines need on local disk.",
        version: ImgdVersion.string,
        subcommands: [RunCommand.self, PrefetchCommand.self, FsckCommand.self],
        defaultSubcommand: RunCommand.self)

    public init() {}

    /// Parses the command line, runs the command and exits. Bad usage exits 2 (the parser's
    /// own default is 64), failures 1, success 0.
    public static func runAndExit() async -> Never {
        do {
            var command = try parseAsRoot()
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
            self.exit()
        } catch {
            if exitCode(for: error) == .validationFailure {
                // Line by line: the message and the usage are lines of their own, each escaped
                // (a line break inside one would show as `\n`).
                let console = Console()
                for line in fullMessage(for: error).split(separator: "\n", omittingEmptySubsequences: false) {
                    console.message(String(line))
                }
                self.exit(withError: ExitCode(2))
            }
            self.exit(withError: error)
        }
    }
}
