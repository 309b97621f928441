import CSpawnShim
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A program a test starts: spawned with `posix_spawn`, inheriting no descriptor but its standard
/// three, with a thread of its own waiting for its exit.
///
/// Not Foundation's `Process`, for two faults of it on Linux that hang or slow a parallel test run:
/// a child inherits descriptors other threads open while it is being spawned (so one test's child
/// keeps another test's pipes open), and `Process` learns of an exit when the child closes a socket
/// it was handed, then calls a blocking `waitpid` on its one monitor thread — a child that closes
/// unknown descriptors before exec, as `systemd-socket-activate` does, parks that thread until it
/// exits, and with it the exit of every other child of the run.
public final class ChildProcess: Sendable {
    /// Where a standard output stream goes.
    public enum Destination: Sendable, Equatable {
        /// `/dev/null`.
        case null
        /// A file, emptied first and appended to, so stdout and stderr may share it.
        case file(String)
        /// A pipe this process reads to the end while the child runs: see `output()`.
        case pipe
    }

    /// What a child wrote to its piped streams, and how it ended.
    public struct Output: Sendable {
        /// The exit status, shell style: the exit code, or 128 + the signal that ended it.
        public let status: Int32
        public let stdout: String
        public let stderr: String
    }

    /// Why spawning failed.
    public struct SpawnError: Error, CustomStringConvertible {
        public let executable: String
        public let step: String
        public let code: Int32
        public var description: String { "cannot start \(executable): \(step): \(String(cString: strerror(code)))" }
    }

    public let pid: pid_t
    private let exit = OneShot<Int32>()
    private let stdoutText: OneShot<Data>?
    private let stderrText: OneShot<Data>?

    /// Starts `executable` (a path) with `arguments`, in `folder` when given, with exactly
    /// `environment`, standard input from `/dev/null`.
    public init(
        _ executable: String, _ arguments: [String], in folder: String? = nil,
        environment: [String: String] = ProcessInfo.processInfo.environment,
        stdout: Destination = .null, stderr: Destination = .null
    ) throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        var pipes: [(read: Int32, write: Int32)?] = []
        defer { for pipe in pipes { if let pipe { close(pipe.write) } } }

        func check(_ result: Int32, _ step: String) throws {
            guard result == 0 else { throw SpawnError(executable: executable, step: step, code: result) }
        }
        try check(posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0), "stdin")
        for (target, destination) in [(Int32(1), stdout), (Int32(2), stderr)] {
            switch destination {
            case .null:
                pipes.append(nil)
                try check(posix_spawn_file_actions_addopen(&actions, target, "/dev/null", O_WRONLY, 0), "/dev/null")
            case .file(let path):
                pipes.append(nil)
                let emptied = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
                guard emptied >= 0 else { throw SpawnError(executable: executable, step: path, code: errno) }
                close(emptied)
                try check(
                    posix_spawn_file_actions_addopen(&actions, target, path, O_WRONLY | O_APPEND, 0), path)
            case .pipe:
                var ends: [Int32] = [0, 0]
                // Close-on-exec only matters for other spawners: ours close every other descriptor.
                guard pipe(&ends) == 0 else { throw SpawnError(executable: executable, step: "pipe", code: errno) }
                _ = fcntl(ends[0], F_SETFD, FD_CLOEXEC)
                _ = fcntl(ends[1], F_SETFD, FD_CLOEXEC)
                pipes.append((ends[0], ends[1]))
                try check(posix_spawn_file_actions_adddup2(&actions, ends[1], target), "dup2")
            }
        }
        try check(imgd_spawn_add_closefrom(&actions, 3), "closefrom")
        if let folder { try check(imgd_spawn_add_chdir(&actions, folder), "chdir \(folder)") }

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        // Its own process group, and default signal dispositions (a test runner may ignore some).
        var defaults = sigset_t()
        sigfillset(&defaults)
        var unblocked = sigset_t()
        sigemptyset(&unblocked)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setsigmask(&attributes, &unblocked)
        posix_spawnattr_setflags(
            &attributes, Int16(POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))

        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        var child: pid_t = 0
        try check(posix_spawn(&child, executable, &actions, &attributes, argv, envp), "posix_spawn")
        pid = child
        let spawned = child
        stdoutText = pipes[0].map { Self.drain($0.read) }
        stderrText = pipes[1].map { Self.drain($0.read) }
        let exit = exit
        Thread.detachNewThread {
            var status: Int32 = 0
            while waitpid(spawned, &status, 0) < 0, errno == EINTR {}
            // WIFEXITED / WEXITSTATUS / WTERMSIG, which are macros.
            let signal = status & 0x7F
            exit.fulfil(signal == 0 ? (status >> 8) & 0xFF : 128 + signal)
        }
    }

    /// A kill for a child a failed test left running, so it cannot outlive the run.
    deinit {
        if isRunning { kill(pid, SIGKILL) }
    }

    /// Whether it has not exited yet (it may be exiting).
    public var isRunning: Bool { exit.current == nil }

    /// The exit status, shell style (the code, or 128 + the signal), once it has exited.
    public var status: Int32? { exit.current }

    public func signal(_ number: Int32) {
        if isRunning { kill(pid, number) }
    }

    /// Waits for the exit, without holding a thread of Swift's cooperative pool; the status.
    @discardableResult
    public func exited() async -> Int32 {
        await exit.value
    }

    /// Waits for the exit for at most `timeout`; after that, kills it and returns nil.
    public func exited(within timeout: Duration) async -> Int32? {
        let pid = pid
        let killer = Task {
            try await Task.sleep(for: timeout)
            kill(pid, SIGKILL)
            return true
        }
        let status = await exited()
        killer.cancel()
        return (try? await killer.value) == true ? nil : status
    }

    /// Waits for the exit (killing it once `timeout` has passed: a child that hangs fails its
    /// test instead of holding the run) and for the piped streams' ends; what they held.
    public func output(within timeout: Duration = .seconds(120)) async -> Output {
        var status = await exited(within: timeout) ?? -1
        if status == -1 { status = await exited() }  // killed: its SIGKILL status, at once
        let out = await stdoutText?.value ?? Data()
        let err = await stderrText?.value ?? Data()
        return Output(status: status, stdout: String(decoding: out, as: UTF8.self), stderr: String(decoding: err, as: UTF8.self))
    }

    /// Runs `executable` to its end with stdout and stderr piped; killed if it outlives `timeout`.
    public static func run(
        _ executable: String, _ arguments: [String], in folder: String? = nil,
        environment: [String: String] = ProcessInfo.processInfo.environment, timeout: Duration = .seconds(60)
    ) async throws -> Output {
        let child = try ChildProcess(
            executable, arguments, in: folder, environment: environment, stdout: .pipe, stderr: .pipe)
        _ = await child.exited(within: timeout)
        return await child.output()
    }

    /// Reads `descriptor` to its end on a thread of its own (a blocking read on the cooperative
    /// pool would starve the other tests), then closes it.
    private static func drain(_ descriptor: Int32) -> OneShot<Data> {
        let text = OneShot<Data>()
        Thread.detachNewThread {
            var data = Data()
            var chunk = [UInt8](repeating: 0, count: 65536)
            while true {
                let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
                if count > 0 {
                    data.append(contentsOf: chunk[..<count])
                } else if count == 0 || errno != EINTR {
                    break
                }
            }
            close(descriptor)
            text.fulfil(data)
        }
        return text
    }
}
