import ArgumentParser

/// `imgctl`'s exit statuses, and the one place that turns an error into a status and the text
/// to print.
///
/// 0 success; 1 the daemon answered an error (or this side failed); 2 bad usage; 3 the daemon
/// cannot be reached. swift-argument-parser's own status for bad usage is 64 (`EX_USAGE`); it
/// is mapped to 2 here, like every other imgd tool.
public struct ImgctlExit: Equatable, Sendable {
    public static let success: Int32 = 0
    public static let failure: Int32 = 1
    public static let usage: Int32 = 2
    public static let unreachable: Int32 = 3

    /// The status to exit with.
    public var status: Int32
    /// Text for stdout (the help text, a completion script), without a final newline.
    public var standardOutput: String?
    /// Text for stderr, without a final newline.
    public var standardError: String?

    public init(status: Int32, standardOutput: String? = nil, standardError: String? = nil) {
        self.status = status
        self.standardOutput = standardOutput
        self.standardError = standardError
    }

    /// What to print and how to exit for `error`, thrown while parsing or running `imgctl`.
    public static func forError(_ error: any Error) -> ImgctlExit {
        if let failure = error as? ImgctlError {
            return ImgctlExit(status: failure.exitStatus, standardError: failure.message)
        }
        let code = ImgctlCommand.exitCode(for: error)
        let text = ImgctlCommand.fullMessage(for: error)
        let message = text.isEmpty ? nil : text
        if code == .validationFailure {
            return ImgctlExit(status: usage, standardError: message)
        }
        if code == .success {
            // --help, --version, --generate-completion-script: the text is the output.
            return ImgctlExit(status: success, standardOutput: message)
        }
        return ImgctlExit(status: code.rawValue, standardError: message)
    }
}
