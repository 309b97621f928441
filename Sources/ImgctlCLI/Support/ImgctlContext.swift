import ImgdCore

#if canImport(Glibc)
import Glibc
#endif

/// What a command may touch beyond its arguments: the environment, stdout and stderr. The
/// executable passes the process's own (``process()``); tests pass buffers and a made-up
/// environment, and run commands in-process.
public struct ImgctlContext {
    /// The environment (`IMGD_SOCKET`).
    public var environment: [String: String]
    /// Replies, tables, summaries, the bytes of `get -o -`: what scripts read.
    public var standardOutput: any OutputSink
    /// Errors, and the live progress of `warm --wait`.
    public var standardError: any OutputSink
    /// Whether stderr is a terminal: progress bars are redrawn in place only then.
    public var standardErrorIsTerminal: Bool
    /// Whether a file exists at a path (relative to the working directory): how the embedded
    /// default socket `./imgd-data/imgd.sock` is found. A seam for tests.
    var fileExists: (String) -> Bool = ImgctlContext.lstatExists
    /// Called after a link list is completely written under its temporary name and right before
    /// it is renamed to its final name; a seam for tests that check the order.
    var beforeSpoolRename: ((_ temporaryPath: String, _ finalPath: String) -> Void)?
    /// How often `warm --wait` asks for `lists` (200 ms), and how often it prints a progress
    /// line when stderr is not a terminal (every 10th poll: 2 s).
    var pollInterval: Duration = .milliseconds(200)
    /// Seconds since 1970 now, for the ages `lists` shows (`claimed_at` 3m 10s ago). A seam for
    /// tests, whose recorded replies carry the moments of the recording.
    var now: () -> Double = { Double(WallClock.nowMilliseconds()) / 1000 }

    public init(
        environment: [String: String], standardOutput: any OutputSink, standardError: any OutputSink,
        standardErrorIsTerminal: Bool = false
    ) {
        self.environment = environment
        self.standardOutput = standardOutput
        self.standardError = standardError
        self.standardErrorIsTerminal = standardErrorIsTerminal
    }

    /// The process's environment, stdout and stderr.
    public static func process() -> ImgctlContext {
        var environment: [String: String] = [:]
        var entry = environ
        while let pointer = entry.pointee {
            let text = String(cString: pointer)
            if let equals = text.firstIndex(of: "=") {
                environment[String(text[..<equals])] = String(text[text.index(after: equals)...])
            }
            entry += 1
        }
        let standardError = FileDescriptorOutput(STDERR_FILENO)
        return ImgctlContext(
            environment: environment, standardOutput: FileDescriptorOutput(STDOUT_FILENO),
            standardError: standardError, standardErrorIsTerminal: standardError.isTerminal)
    }

    /// Whether anything (a socket, a file, a dangling link) is at `path`.
    static func lstatExists(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0
    }
}
