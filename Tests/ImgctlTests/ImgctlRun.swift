@testable import ImgctlCLI

/// One in-process run of `imgctl`: its exit status and what it printed.
struct ImgctlRun {
    let status: Int32
    let stdout: CapturedOutput
    let stderr: CapturedOutput

    /// Runs `imgctl arguments…` with `environment` (nothing else: no IMGD_SOCKET leaks in from
    /// the machine running the tests) and no embedded default socket unless `embedded` says so.
    init(
        _ arguments: [String], environment: [String: String] = [:], embeddedSocketExists: Bool = false,
        configure: (inout ImgctlContext) -> Void = { _ in }
    ) {
        let stdout = CapturedOutput()
        let stderr = CapturedOutput()
        var context = ImgctlContext(environment: environment, standardOutput: stdout, standardError: stderr)
        context.fileExists = { _ in embeddedSocketExists }
        context.pollInterval = .milliseconds(20)
        configure(&context)
        status = ImgctlCommand.run(arguments: arguments, context: context)
        self.stdout = stdout
        self.stderr = stderr
    }
}
