import ArgumentParser

/// The options every subcommand takes: where the daemon is, and whether to print its replies raw.
struct ConnectionOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "The control socket. Default: $IMGD_SOCKET, else ./imgd-data/imgd.sock if it exists, else /run/imgd/imgd.sock.",
            valueName: "path"),
        completion: .file())
    var socket: String?

    @Flag(help: "Print the daemon's reply lines as they are (one JSON object a line) instead of the human format.")
    var json = false
}
