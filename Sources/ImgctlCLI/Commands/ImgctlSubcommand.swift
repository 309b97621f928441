import ArgumentParser

/// A subcommand that runs against an ``ImgctlContext`` (stdout, stderr, environment), so the
/// tests run it in-process with buffers.
protocol ImgctlSubcommand: ParsableCommand {
    func execute(in context: ImgctlContext) throws(ImgctlError)
}

extension ImgctlSubcommand {
    /// Run directly (outside ``ImgctlCommand/run(arguments:context:)``): with the process's
    /// stdout, stderr and environment.
    func run() throws {
        try execute(in: .process())
    }
}
