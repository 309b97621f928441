import Foundation
import ImgdTestSupport
import Testing

/// The real `imgd` daemon, started in a scratch folder for one test: its folders are the
/// embedded default (`./imgd-data/...`) unless the arguments say otherwise, and its log goes
/// to `imgd.log` in the scratch folder.
final class DaemonProcess: Sendable {
    let folder: String
    let socket: String
    private let process: UncheckedBox<Process>

    /// Starts `imgd` with `arguments` in `folder` and waits until its socket answers `ping`.
    static func start(
        in folder: String, arguments: [String] = [], environment: [String: String] = [:],
        socket: String? = nil, waitForSocket: Bool = true
    ) async throws -> DaemonProcess {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: BinaryRunner.imgdPath)
        process.arguments = arguments
        process.currentDirectoryURL = URL(fileURLWithPath: folder)
        var merged = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        for name in ["NOTIFY_SOCKET", "LISTEN_FDS", "LISTEN_PID", "MEMORY_PRESSURE_WATCH", "JOURNAL_STREAM", "WATCHDOG_USEC"]
        where environment[name] == nil {
            merged[name] = nil
        }
        process.environment = merged
        _ = FileManager.default.createFile(atPath: folder + "/imgd.log", contents: nil)
        let log = try FileHandle(forWritingTo: URL(fileURLWithPath: folder + "/imgd.log"))
        process.standardOutput = log
        process.standardError = log
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let daemon = DaemonProcess(folder: folder, socket: socket ?? folder + "/imgd-data/imgd.sock", process: process)
        if waitForSocket {
            let ready = await eventually(timeout: .seconds(30)) {
                (try? ControlClient(path: daemon.socket).call(#"{"cmd":"ping"}"#)) != nil || !process.isRunning
            }
            guard ready, process.isRunning else {
                throw DaemonError(message: "imgd did not come up: \(daemon.log)")
            }
        }
        return daemon
    }

    private init(folder: String, socket: String, process: Process) {
        self.folder = folder
        self.socket = socket
        self.process = UncheckedBox(process)
    }

    var pid: Int32 { process.value.processIdentifier }
    var isRunning: Bool { process.value.isRunning }

    /// Everything imgd logged so far.
    var log: String { (try? String(contentsOfFile: folder + "/imgd.log", encoding: .utf8)) ?? "" }

    /// Sends one request on a new connection and returns the reply, parsed.
    func call(_ line: String) async throws -> [String: Any] {
        let socket = socket
        let reply = try await offPool { Result { try ControlClient(path: socket).call(line) } }.get()
        guard let object = try JSONSerialization.jsonObject(with: Data(reply.utf8)) as? [String: Any] else {
            throw DaemonError(message: "not a JSON object: \(reply)")
        }
        return object
    }

    /// The `result` of a successful request (fails the test otherwise).
    func result(_ line: String, sourceLocation: SourceLocation = #_sourceLocation) async throws -> [String: Any] {
        let reply = try await call(line)
        #expect(reply["ok"] as? Bool == true, "reply: \(reply)", sourceLocation: sourceLocation)
        return reply["result"] as? [String: Any] ?? [:]
    }

    /// Sends `signal` and, for a stopping signal, waits for the exit; returns the exit status.
    @discardableResult
    func stop(_ signal: Int32 = SIGTERM) async -> Int32 {
        kill(pid, signal)
        await process.value.exited()
        return process.value.terminationStatus
    }

    /// Waits for the exit (after a signal sent elsewhere).
    func waitForExit() async -> Int32 {
        await process.value.exited()
        return process.value.terminationStatus
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
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            let bytes = Array(path.utf8.prefix(raw.count - 1))
            raw.copyBytes(from: bytes + [0])
        }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard connected == 0 else {
            let code = errno
            close(fd)
            throw POSIXError(POSIXErrorCode(rawValue: code) ?? .EIO)
        }
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
