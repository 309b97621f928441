import Logging
import ImgdCore
import Foundation
@testable import ImgdDaemon
import ImgdProtocol
import ImgdTestSupport
import NIOCore
import NIOPosix
import Testing

// MARK: - A command handler with a few commands

/// Commands for the control server's tests: `quick` (answered at once), `ping`, `echo` (its arguments back), `whoami` (the
/// peer), `slow` (waits for ``ControlTestGate``), `big` (a result of `bytes` bytes), `fail` (a
/// download error's code), `args` (the typed accessors); anything else is `unknown_command`.
struct ControlTestHandler: ControlCommandHandler {
    let gate: ControlTestGate

    init(gate: ControlTestGate = ControlTestGate()) {
        self.gate = gate
    }

    /// `quick` is answered at once, on the event loop; everything else by ``handle(_:)``.
    func answerAtOnce(_ request: ControlRequest) -> Result<JSONValue, ControlError>? {
        request.command == "quick" ? .success(["at_once": true]) : nil
    }

    func handle(_ request: ControlRequest) async -> Result<JSONValue, ControlError> {
        switch request.command {
        case "ping":
            return .success(["pong": true])
        case "echo":
            return .success(.object(request.arguments))
        case "whoami":
            return .success(["pid": JSONValue(request.peer.pid), "uid": JSONValue(request.peer.uid), "gid": JSONValue(request.peer.gid)])
        case "slow":
            await gate.wait()
            if Task.isCancelled { return .failure(.other(code: "cancelled", message: "cancelled")) }
            return .success(["slow": true])
        case "big":
            do throws(ControlError) {
                let bytes = try request.int("bytes", in: 0...(64 << 20))
                return .success(["data": .string(String(repeating: "x", count: bytes))])
            } catch {
                return .failure(error)
            }
        case "fail":
            return .failure(.other(code: "http_404", message: "the server answered 404"))
        case "args":
            do throws(ControlError) {
                let url = try request.string("url")
                let fetch = try request.bool("fetch", default: true)
                let urls = try request.optionalStrings("urls") ?? []
                return .success(["url": .string(url), "fetch": .bool(fetch), "urls": JSONValue(urls)])
            } catch {
                return .failure(error)
            }
        default:
            return .failure(.unknownCommand(request.command))
        }
    }
}

/// Holds `slow` commands until the test opens it; counts the waiters and the cancelled ones.
final class ControlTestGate: Sendable {
    private struct State {
        var isOpen = false
        var nextID = 0
        var waiters: [Int: CheckedContinuation<Void, Never>] = [:]
        var cancelledBeforeWaiting: Set<Int> = []
        var cancellations = 0
    }

    /// The waiters and the gate's flag.
    private let state = Locked(State())

    var waiting: Int { state.withLock { $0.waiters.count } }
    var cancellations: Int { state.withLock { $0.cancellations } }

    func open() {
        let waiters = state.withLock { state in
            state.isOpen = true
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume() }
    }

    func wait() async {
        let id = state.withLock { state in
            state.nextID += 1
            return state.nextID
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLock { state in
                    if state.isOpen || state.cancelledBeforeWaiting.remove(id) != nil { return true }
                    state.waiters[id] = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            let waiter = state.withLock { state in
                state.cancellations += 1
                guard let waiter = state.waiters.removeValue(forKey: id) else {
                    state.cancelledBeforeWaiting.insert(id)
                    return CheckedContinuation<Void, Never>?.none
                }
                return waiter
            }
            waiter?.resume()
        }
    }
}

/// Log lines collected from any thread.
final class ControlTestLog: Sendable {
    private let state = Locked<[String]>([])

    var lines: [String] { state.withLock { $0 } }

    func append(_ line: String) {
        state.withLock { $0.append(line) }
    }
}

// MARK: - A server on a temporary socket

/// A temporary folder with a short path (a socket path must stay under 108 bytes).
struct ControlTestFolder: ~Copyable {
    let path: String

    init() throws {
        path = try ScratchFolder("imgd-control").path
    }

    var socketPath: String { path + "/imgd.sock" }

    deinit {
        try? FileManager.default.removeItem(atPath: path)
    }
}

/// A started server with its handler, hub and log.
///
/// The server and the clients it connects run on event loops of their own (``loops``), not on
/// NIO's shared singleton: some of these tests keep their loops busy on purpose (a 10 MiB line
/// scanned for its newline, 10,000 pipelined replies, 1,000 connections), and on shared loops
/// every other control test's reads, writes and closes waited behind them.
struct ControlTestServer {
    let server: ControlServer
    let path: String
    let gate: ControlTestGate
    let events: EventHub
    let log: ControlTestLog
    let loops: MultiThreadedEventLoopGroup

    static func start(at path: String, limits: ControlLimits = ControlLimits()) async throws -> ControlTestServer {
        let gate = ControlTestGate()
        let events = EventHub()
        let log = ControlTestLog()
        let loops = MultiThreadedEventLoopGroup(numberOfThreads: 2)
        let server = ControlServer(
            listening: .path(path), limits: limits, handler: ControlTestHandler(gate: gate), events: events,
            logger: .forwarding { log.append($0) }, group: loops)
        do {
            try await server.start()
        } catch {
            try? await loops.shutdownGracefully()
            throw error
        }
        return ControlTestServer(server: server, path: path, gate: gate, events: events, log: log, loops: loops)
    }

    func connect(reading: Bool = true) async throws -> ControlTestClient {
        try await ControlTestClient.connect(to: path, reading: reading, group: loops)
    }

    /// Stops the server, then its loops (closing any client still connected).
    func stop() async {
        gate.open()
        await server.stop()
        try? await loops.shutdownGracefully()
    }
}

// MARK: - A client

/// A control connection from the test, through NIO: lines arrive in an inbox the test polls.
/// Waits default to 30 s: they end as soon as the line arrives, and this machine's 2 cores are
/// often shared with builds.
final class ControlTestClient: Sendable {
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    let channel: any Channel
    let inbox: ControlTestInbox

    private init(channel: any Channel, inbox: ControlTestInbox) {
        self.channel = channel
        self.inbox = inbox
    }

    /// Connects to `path` on `group`; with `reading: false` the client reads nothing until
    /// ``startReading()``.
    static func connect(
        to path: String, reading: Bool = true, group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) async throws -> ControlTestClient {
        let inbox = ControlTestInbox()
        let channel = try await ClientBootstrap(group: group)
            .channelOption(.autoRead, value: reading)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(ControlTestLineCollector(inbox: inbox))
                }
            }
            .connect(unixDomainSocketPath: path).get()
        return ControlTestClient(channel: channel, inbox: inbox)
    }

    /// Sends `text` and a newline.
    func send(_ text: String) async throws {
        try await sendRaw(ByteBuffer(string: text + "\n"))
    }

    func sendRaw(_ bytes: ByteBuffer) async throws {
        try await channel.writeAndFlush(bytes).get()
    }

    /// The next line the server sent.
    func nextLine(timeout: Duration = .seconds(30)) async throws -> String {
        guard await eventually(timeout: timeout, { inbox.hasLine || inbox.isClosed }), let line = inbox.popLine() else {
            throw Failure(description: inbox.isClosed ? "the connection closed" : "no line within \(timeout)")
        }
        return line
    }

    func nextValue(timeout: Duration = .seconds(30)) async throws -> JSONValue {
        try JSONValue(parsing: try await nextLine(timeout: timeout))
    }

    /// Sends `text` and returns the next line as JSON.
    func request(_ text: String) async throws -> JSONValue {
        try await send(text)
        return try await nextValue()
    }

    /// Whether the server closed the connection (after the lines already received).
    func waitUntilClosed(timeout: Duration = .seconds(30)) async -> Bool {
        await eventually(timeout: timeout) { inbox.isClosed }
    }

    func startReading() {
        channel.setOption(ChannelOptions.autoRead, value: true).whenComplete { _ in }
        channel.read()
    }

    func stopReading() async throws {
        try await channel.setOption(ChannelOptions.autoRead, value: false).get()
    }

    func close() async {
        try? await channel.close().get()
    }
}

/// The lines a test client received, and whether its connection closed.
final class ControlTestInbox: Sendable {
    private struct State {
        var lines: [String] = []
        var next = 0
        var closed = false
    }

    private let state = Locked(State())

    var hasLine: Bool { state.withLock { $0.next < $0.lines.count } }
    var isClosed: Bool { state.withLock { $0.closed } }
    /// Lines received and not yet taken.
    var unread: Int { state.withLock { $0.lines.count - $0.next } }

    func popLine() -> String? {
        state.withLock { state in
            guard state.next < state.lines.count else { return nil }
            defer { state.next += 1 }
            return state.lines[state.next]
        }
    }

    func append(_ line: String) {
        state.withLock { $0.lines.append(line) }
    }

    func markClosed() {
        state.withLock { $0.closed = true }
    }
}

/// Splits the client's bytes into lines for its inbox.
final class ControlTestLineCollector: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    private let inbox: ControlTestInbox
    private var partial: [UInt8] = []

    init(inbox: ControlTestInbox) {
        self.inbox = inbox
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        for byte in unwrapInboundIn(data).readableBytesView {
            if byte == UInt8(ascii: "\n") {
                inbox.append(String(decoding: partial, as: UTF8.self))
                partial.removeAll(keepingCapacity: true)
            } else {
                partial.append(byte)
            }
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        inbox.markClosed()
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}

// MARK: - Raw sockets

/// Blocking socket calls for tests that must control every byte, run on a thread of their own
/// so the cooperative pool stays free for the server's command handler.
enum ControlRawSocket {
    /// A connected Unix stream socket, or -1.
    static func connect(to path: String) -> Int32 {
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { return -1 }
        guard (try? UnixSocketAddress(path: path))?.withSockaddr({ Glibc.connect(descriptor, $0, $1) }) == 0 else {
            close(descriptor)
            return -1
        }
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(descriptor, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        return descriptor
    }

    /// A socket bound to `path` and listening, or -1.
    static func listen(at path: String) -> Int32 {
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { return -1 }
        guard (try? UnixSocketAddress(path: path))?.withSockaddr({ bind(descriptor, $0, $1) }) == 0, Glibc.listen(descriptor, 16) == 0 else {
            close(descriptor)
            return -1
        }
        return descriptor
    }

    /// Sends all of `bytes` or stops at the first failure; returns the bytes sent.
    static func send(_ descriptor: Int32, _ bytes: [UInt8]) -> Int {
        var sent = 0
        while sent < bytes.count {
            let result = bytes.withUnsafeBytes { raw in
                Glibc.send(descriptor, raw.baseAddress! + sent, bytes.count - sent, Int32(MSG_NOSIGNAL))
            }
            if result < 0 {
                if errno == EINTR { continue }
                return sent
            }
            sent += result
        }
        return sent
    }

    /// One reply line (without its newline) read byte by byte, or nil at end of file or error.
    static func readLine(_ descriptor: Int32) -> String? {
        var line: [UInt8] = []
        while true {
            var byte: UInt8 = 0
            let got = recv(descriptor, &byte, 1, 0)
            if got < 0, errno == EINTR { continue }
            guard got == 1 else { return nil }
            if byte == UInt8(ascii: "\n") { return String(decoding: line, as: UTF8.self) }
            line.append(byte)
        }
    }

    /// Reads until end of file, an error or the receive timeout.
    static func receiveAll(_ descriptor: Int32) -> [UInt8] {
        var received: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = chunk.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress!, $0.count, 0) }
            if count < 0 && errno == EINTR { continue }
            if count <= 0 { return received }
            received.append(contentsOf: chunk[0..<count])
        }
    }

}

/// Raises the soft limit of open files to the hard limit (a test opens 2,000 descriptors).
func raiseOpenFileLimit() {
    var limit = rlimit()
    guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < limit.rlim_max else { return }
    limit.rlim_cur = limit.rlim_max
    setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
}
