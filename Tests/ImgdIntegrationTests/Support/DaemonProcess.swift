import ImgdCore
import Foundation
import ImgdTestSupport
import Testing

/// The real `imgd` daemon, started in a scratch folder for one test: its folders are the
/// embedded default (`./imgd-data/...`) unless the arguments say otherwise, and its log goes
/// to `imgd.log` (or `logName`) in the scratch folder. The one wrapper of a daemon child: behind
/// a shell or `systemd-socket-activate` too (`launcher`), waiting for its socket or not.
final class DaemonProcess: Sendable {
    let folder: String
    let socket: String
    /// The file its stdout and stderr go to.
    let logPath: String
    private let process: ChildProcess

    /// The variables systemd (or an outer imgd) may have set around the test run, which would
    /// change how imgd and imgctl behave: where they notify, which socket they serve or ask,
    /// their folders, the watchdog, memory pressure.
    static let serviceVariables = [
        "NOTIFY_SOCKET", "LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES", "MEMORY_PRESSURE_WATCH",
        "MEMORY_PRESSURE_WRITE", "JOURNAL_STREAM", "WATCHDOG_USEC", "WATCHDOG_PID", "IMGD_SOCKET",
        "STATE_DIRECTORY", "CACHE_DIRECTORY", "RUNTIME_DIRECTORY",
    ]

    /// The test process's environment without ``serviceVariables``, then `adding` (which may set
    /// any of them again): what every child the tests start from imgd's binaries gets.
    static func environment(adding: [String: String] = [:]) -> [String: String] {
        var environment = ProcessInfo.processInfo.environment
        for name in serviceVariables { environment[name] = nil }
        return environment.merging(adding) { $1 }
    }

    /// Starts `imgd` with `arguments` in `folder` and, unless `waitForSocket` is false, waits
    /// until its socket answers `ping`. `environment` is added to the clean one
    /// (``environment(adding:)``). `launcher` (a command and its arguments) runs imgd when given:
    /// it is started with imgd's path and `arguments` after its own, and must exec imgd (a
    /// shell, `systemd-socket-activate`, `prlimit`).
    static func start(
        in folder: String, arguments: [String] = [], environment: [String: String] = [:],
        socket: String? = nil, waitForSocket: Bool = true, launcher: [String] = [], logName: String = "imgd.log"
    ) async throws -> DaemonProcess {
        let log = folder + "/" + logName
        let command = launcher + [BinaryRunner.imgdPath] + Self.withoutCourtesy(arguments)
        let process = try ChildProcess(
            command[0], Array(command.dropFirst()), in: folder, environment: Self.environment(adding: environment),
            stdout: .file(log), stderr: .file(log))
        let daemon = DaemonProcess(
            folder: folder, socket: socket ?? folder + "/imgd-data/imgd.sock", logPath: log, process: process)
        if waitForSocket {
            let socket = daemon.socket
            let ready = await eventually(timeout: .seconds(30)) {
                let answered = await onOwnThread { (try? ControlClient(path: socket).call(#"{"cmd":"ping"}"#)) != nil }
                return answered || !process.isRunning
            }
            guard ready, process.isRunning else {
                throw DaemonError(message: "imgd did not come up: \(daemon.log)")
            }
        }
        return daemon
    }

    /// `arguments` with `--courtesy false` added unless they set courtesy themselves: the
    /// courtesy loop, on by default, lowers prefetch parallelism while the machine is loaded,
    /// and the suite loads both cores; a test of anything else must not depend on that load.
    /// The courtesy tests turn it on with their own flags.
    static func withoutCourtesy(_ arguments: [String]) -> [String] {
        if arguments.contains(where: { $0.hasPrefix("--courtesy") }) { return arguments }
        if let first = arguments.first, !first.hasPrefix("-"), first != "run" { return arguments }
        return arguments + ["--courtesy", "false"]
    }

    private init(folder: String, socket: String, logPath: String, process: ChildProcess) {
        self.folder = folder
        self.socket = socket
        self.logPath = logPath
        self.process = process
    }

    var pid: Int32 { process.pid }
    var isRunning: Bool { process.isRunning }

    /// Kills the daemon if a test ends (or fails) while it still runs.
    func killIfRunning() {
        if isRunning { kill(pid, SIGKILL) }
    }

    /// Everything imgd (and its launcher) logged so far.
    var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    /// Sends `number` without waiting (see ``stop(_:sourceLocation:)`` for a stop that waits).
    func signal(_ number: Int32) {
        process.signal(number)
    }

    /// Sends one request on a new connection and returns the reply, parsed.
    func call(_ line: String) async throws -> [String: Any] {
        let socket = socket
        let reply = try await onOwnThread { Result { try ControlClient(path: socket).call(line) } }.get()
        return try KeptConnection.parseReply(reply)
    }

    /// The `result` of a successful request (fails the test otherwise).
    func result(_ line: String, sourceLocation: SourceLocation = #_sourceLocation) async throws -> [String: Any] {
        let reply = try await call(line)
        #expect(reply["ok"] as? Bool == true, "reply: \(reply)", sourceLocation: sourceLocation)
        return reply["result"] as? [String: Any] ?? [:]
    }

    /// Sends `signal` and, for a stopping signal, waits for the exit; returns the exit status
    /// (shell style: 128 + the signal when one ended it).
    ///
    /// Never waits forever: a daemon that has not exited 60 s after the signal (it ignored it,
    /// or hangs in its stop) is killed, the test records the failure, and this returns -1, so
    /// one stuck daemon fails its test instead of hanging the whole run.
    @discardableResult
    func stop(_ signal: Int32 = SIGTERM, sourceLocation: SourceLocation = #_sourceLocation) async -> Int32 {
        process.signal(signal)
        guard let status = await process.exited(within: Self.stopDeadline) else {
            Issue.record("imgd did not exit within \(Self.stopDeadline) of signal \(signal); killed. Log:\n\(log)", sourceLocation: sourceLocation)
            return -1
        }
        return status
    }

    /// How long ``stop(_:sourceLocation:)`` waits for the exit before it kills the daemon.
    static let stopDeadline = Duration.seconds(60)

    /// Sends `signal` and waits up to `timeout` for the exit: the exit status and how long it
    /// took, or nil (after a SIGKILL, so the test goes on) when it did not exit in time.
    func stop(_ signal: Int32, within timeout: Duration) async -> (status: Int32, took: Duration)? {
        let started = ContinuousClock.now
        process.signal(signal)
        guard let status = await process.exited(within: timeout) else { return nil }
        return (status, ContinuousClock.now - started)
    }

    /// Waits for the exit (after a signal sent elsewhere), at most ``stopDeadline``: then the
    /// daemon is killed, the failure recorded, and -1 returned.
    func waitForExit(sourceLocation: SourceLocation = #_sourceLocation) async -> Int32 {
        guard let status = await process.exited(within: Self.stopDeadline) else {
            Issue.record("imgd did not exit within \(Self.stopDeadline); killed. Log:\n\(log)", sourceLocation: sourceLocation)
            return -1
        }
        return status
    }
}

struct DaemonError: Error, CustomStringConvertible {
    let message: String
    var description: String { message }
}

/// A value that is not Sendable, handed between threads by tests that keep to one user at a time.
final class UncheckedBox<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}

/// A blocking JSON-line client of the control socket, for tests (run it off the cooperative pool).
final class ControlClient {
    let fd: Int32
    private var buffer: [UInt8] = []

    init(path: String) throws {
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        // Not closed here: once every property is set, a throwing init runs deinit, which
        // closes it (a second close could hit a descriptor another test has just opened).
        guard let connected = (try? UnixSocketAddress(path: path))?.withSockaddr({ connect(fd, $0, $1) }) else { throw POSIXError(.ENAMETOOLONG) }
        guard connected == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        var timeout = timeval(tv_sec: 60, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit { close(fd) }

    /// Writes `line` (a newline is added) and returns the next line that is not an event.
    func call(_ line: String) throws -> String {
        try send(line)
        while true {
            let reply = try readLine()
            if !reply.hasPrefix(#"{"event""#) { return reply }
        }
    }

    func send(_ line: String) throws {
        let bytes = Array((line + "\n").utf8)
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            guard written > 0 else { throw POSIXError(.EPIPE) }
            offset += written
        }
    }

    /// The next line the daemon sent (without its newline).
    func readLine() throws -> String {
        while true {
            if let end = buffer.firstIndex(of: 0x0A) {
                let line = String(decoding: buffer[..<end], as: UTF8.self)
                buffer.removeSubrange(...end)
                return line
            }
            var chunk = [UInt8](repeating: 0, count: 65536)
            let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            guard count > 0 else { throw POSIXError(.ECONNRESET) }
            buffer += chunk[..<count]
        }
    }
}

// MARK: - The spool

extension DaemonProcess {
    /// The spool folder of the embedded default layout.
    var spool: String { folder + "/imgd-data/spool" }

    /// Drops a list the way a client should: written as `.NAME.tmp`, then renamed into place.
    /// Drops a list of `count` numbered URLs (``DaemonSpoolTests/numberedURLs(_:prefix:)``),
    /// built and written on a thread of its own: millions of lines take seconds in a debug
    /// build, which on the cooperative pool would stall every other test running at once.
    func dropNumberedURLs(_ name: String, count: Int, prefix: String = "http://a/") async throws {
        let temp = spool + "/." + name + ".tmp"
        let final = spool + "/" + name
        let written: Result<Void, any Error> = await onOwnThread {
            Result {
                try Data(DaemonSpoolTests.numberedURLs(count, prefix: prefix)).write(to: URL(fileURLWithPath: temp))
                guard rename(temp, final) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
            }
        }
        try written.get()
    }

    /// Drops a list as `drop(_:_:)` does, its file owned by `owner` (a second member's list).
    func drop(_ name: String, _ contents: String, owner: uid_t? = nil) throws {
        let temp = spool + "/." + name + ".tmp"
        try Data(contents.utf8).write(to: URL(fileURLWithPath: temp))
        if let owner, chown(temp, owner, gid_t(bitPattern: -1)) != 0 { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        guard rename(temp, spool + "/" + name) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
    }

    /// The `lists` result.
    func lists() async throws -> [[String: Any]] {
        try await result(#"{"cmd":"lists"}"#)["lists"] as? [[String: Any]] ?? []
    }

    /// The list named `name` as `lists` shows it, if it does.
    func list(_ name: String) async throws -> [String: Any]? {
        try await lists().first { $0["name"] as? String == name }
    }

    /// Waits until the list named `name` is in a finished state (`done`, `failed`, `cancelled`)
    /// and returns it as `lists` shows it; nil after `timeout`.
    func finishedList(_ name: String, timeout: Duration = .seconds(30)) async -> [String: Any]? {
        var found: [String: Any]?
        _ = await eventually(timeout: timeout, interval: .milliseconds(25)) {
            guard let list = try await list(name), let state = list["state"] as? String,
                ["done", "failed", "cancelled"].contains(state)
            else { return false }
            found = list
            return true
        }
        return found
    }

    /// The parsed `NAME.report.json` in the spool's `sub` folder (`done`, `failed`), once it exists.
    func report(_ name: String, in sub: String, timeout: Duration = .seconds(10)) async -> [String: Any]? {
        let path = spool + "/" + sub + "/" + name + ".report.json"
        guard await eventually(timeout: timeout, { FileManager.default.fileExists(atPath: path) }),
            let data = FileManager.default.contents(atPath: path)
        else { return nil }
        return (try? JSONSerialization.jsonObject(with: data)) as? [String: Any]
    }

    /// Names in the spool folder itself (not its subfolders' contents).
    func spoolNames() -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: spool)) ?? []).sorted()
    }

    /// Subscribes on a connection of its own; events arrive in the background.
    func subscribe(_ events: [String]? = nil) async throws -> EventSubscription {
        let socket = socket
        return try await onOwnThread { Result { try EventSubscription(socket: socket, events: events) } }.get()
    }
}

/// One event line received by an ``EventSubscription``.
struct ReceivedEvent: Sendable {
    let name: String
    let seq: Int
    /// The `data` object, as JSON text.
    let line: String
    /// When the line was read, on the subscription's own thread.
    let receivedAt = ContinuousClock.now

    var data: [String: Any] {
        let object = (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any]
        return object?["data"] as? [String: Any] ?? [:]
    }

    init?(line: String) {
        guard let object = (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any],
            let name = object["event"] as? String, let seq = object["seq"] as? Int
        else { return nil }
        self.name = name
        self.seq = seq
        self.line = line
    }
}

/// A connection that sent `subscribe` and collects every event line on a thread of its own until the daemon closes the connection or ``close()`` is called.
///
/// `@unchecked Sendable`: after `init` only the reader thread uses `client`; `received` is
/// behind its mutex.
final class EventSubscription: @unchecked Sendable {
    private let client: ControlClient
    private let received = Locked<(events: [ReceivedEvent], other: [String], ended: Bool)>(([], [], false))

    /// Connects, subscribes to `events` (all when nil) and starts reading.
    init(socket: String, events: [String]?) throws {
        client = try ControlClient(path: socket)
        var noTimeout = timeval(tv_sec: 0, tv_usec: 0)
        setsockopt(client.fd, SOL_SOCKET, SO_RCVTIMEO, &noTimeout, socklen_t(MemoryLayout<timeval>.size))
        let names = events.map { ",\"events\":[" + $0.map { "\"\($0)\"" }.joined(separator: ",") + "]" } ?? ""
        let reply = try client.call(#"{"cmd":"subscribe""# + names + "}")
        guard reply.contains(#""ok":true"#) else { throw DaemonError(message: "subscribe failed: \(reply)") }
        Thread.detachNewThread { [self] in
            while let line = try? client.readLine() {
                if let event = ReceivedEvent(line: line) {
                    received.withLock { $0.events.append(event) }
                } else {
                    received.withLock { $0.other.append(line) }
                }
            }
            received.withLock { $0.ended = true }
        }
    }

    /// Every event so far, in arrival order.
    var events: [ReceivedEvent] { received.withLock { $0.events } }

    /// The first event `name` whose data satisfies `matches`, waiting up to `timeout` for it.
    func first(
        _ name: String, timeout: Duration = .seconds(30), where matches: @escaping ([String: Any]) -> Bool = { _ in true }
    ) async -> ReceivedEvent? {
        var found: ReceivedEvent?
        _ = await eventually(timeout: timeout) {
            found = events.first { $0.name == name && matches($0.data) }
            return found != nil
        }
        return found
    }

    /// The `list_done` event of the list named `list`, waiting up to `timeout`.
    func listDone(_ list: String, timeout: Duration = .seconds(30)) async -> ReceivedEvent? {
        await first("list_done", timeout: timeout) { $0["name"] as? String == list }
    }

    /// Ends the connection; the reader stops.
    func close() {
        shutdown(client.fd, Int32(SHUT_RDWR))
    }
}
