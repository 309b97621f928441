import ImgdBase

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

    /// The whole regular file at `path` (a list's report, which the daemon bounds), or nil when
    /// it cannot be opened or read. Read with plain system calls, as everything in imgctl is:
    /// Foundation's `FileManager` would load Foundation and ICU at every start.
    static func contents(of path: String) -> [UInt8]? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(Int(info.st_size))
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let got = chunk.withUnsafeMutableBytes { raw in
                retryingOnInterrupt { read(descriptor, raw.baseAddress, raw.count) }
            }
            guard got >= 0 else { return nil }
            if got == 0 { return bytes }
            bytes += chunk[..<got]
        }
    }
}
