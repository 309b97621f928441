#if canImport(Glibc)
import Glibc
#endif
import CDescriptorPassing
import ImgdBase
import ImgdProtocol

/// A blocking client of imgd's control socket: one connection, one request at a time.
///
/// `imgctl` is a command-line tool that does one thing and exits, so plain blocking calls on
/// the calling thread are the simplest correct design; nothing here runs on Swift's cooperative
/// pool (``ImgdAsyncClient`` is the async layer, which runs these calls on threads of its own).
/// Not `Sendable`: one thread uses a connection at a time. Requests get increasing integer ids (1, 2, …) and a reply is matched by its id; event
/// lines that arrive while a reply is awaited are kept, in order, for ``nextEvent(timeout:)``.
public final class ImgdConnection {
    /// The longest line read: the protocol's 1 MiB, plus slack so a daemon that counts a little
    /// differently (a `\r`, a trailing space) is not cut off. Longer is a protocol error.
    public static let maximumLineLength = 1_048_576 + 64 * 1024

    /// What happened while waiting for an event.
    public enum EventWait {
        case event(ImgdEvent)
        /// The timeout passed first.
        case timedOut
        /// The daemon closed the connection.
        case closed
    }

    /// The path connected to, for messages.
    public let socketPath: String
    /// The most events kept while replies are awaited (10,000 by default); past it the oldest
    /// are dropped, so a chatty subscription cannot grow memory without bound.
    public let keptEventLimit: Int
    private var fileDescriptor: Int32
    private var buffer = LineBuffer(limit: ImgdConnection.maximumLineLength)
    private var nextID = 1
    /// Events read while a reply was awaited, oldest first.
    private var pendingEvents: [ImgdEvent] = []
    private var pendingEventsStart = 0
    /// Reads in which the kernel dropped descriptors passed to us (this process was out of
    /// descriptors): a reply that should have one and has none is then ``ImgdClientError/descriptorLost(socket:)``.
    public private(set) var lostDescriptors = 0
    /// True once the daemon closed its end.
    private var sawEndOfFile = false
    /// Raw bytes taken from the line buffer and not yet handed out by ``readRaw(into:)``.
    private var rawLeftover: ArraySlice<UInt8> = []
    /// Where `read` puts bytes before they join `buffer`; reused across reads.
    private var chunk = [UInt8](repeating: 0, count: 64 * 1024)

    /// Connects to the Unix stream socket at `path`; throws ``ImgdClientError/unreachable(socket:reason:errno:)``.
    public init(connectingTo path: String, keptEventLimit: Int = 10_000) throws(ImgdClientError) {
        socketPath = path
        self.keptEventLimit = keptEventLimit
        guard !path.isEmpty, let address = try? UnixSocketAddress(path: path) else {
            throw .unreachable(
                socket: path, reason: "the path is longer than a socket address allows (\(UnixSocketAddress.maximumLength) bytes)",
                errno: ENAMETOOLONG)
        }
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else {
            throw .unreachable(socket: path, reason: Self.describe(errno), errno: errno)
        }
        let code = address.connect(descriptor)
        guard code == 0 else {
            Glibc.close(descriptor)
            throw .unreachable(socket: path, reason: Self.describe(code), errno: code)
        }
        fileDescriptor = descriptor
    }

    deinit {
        close()
    }

    /// The socket's descriptor (-1 once closed), for the async layer's subscription, which shuts
    /// it down to end a blocked read.
    var descriptor: Int32 { fileDescriptor }

    /// Closes the connection (again is harmless).
    public func close() {
        if fileDescriptor >= 0 {
            Glibc.close(fileDescriptor)
            fileDescriptor = -1
        }
    }

    // MARK: Requests

    /// Sends `{"cmd": command, "id": N, …arguments}` and returns the reply whose id is N.
    public func request(_ command: String, _ arguments: [String: JSONValue] = [:]) throws(ImgdClientError) -> ImgdReply {
        let id: Int
        do throws(ImgdClientError) {
            id = try send(command, arguments)
        } catch .connectionLost {
            // The daemon may have said why before it closed (`busy` is sent once, then the
            // connection is closed): that line is still ours to read.
            return try awaitReply(id: nextID - 1)
        }
        return try awaitReply(id: id)
    }

    /// Sends one request line and returns its id.
    @discardableResult
    public func send(_ command: String, _ arguments: [String: JSONValue] = [:]) throws(ImgdClientError) -> Int {
        let id = nextID
        nextID += 1
        var members = arguments
        members["cmd"] = .string(command)
        members["id"] = JSONValue(id)
        try writeAll(Array((JSONValue.object(members).jsonText + "\n").utf8))
        return id
    }

    /// Reads until the reply to request `id`; events read meanwhile are kept for
    /// ``nextEvent(timeout:)``. A failure without an id (`busy`, `line_too_long`: the daemon
    /// could not tell whose it was) counts as the reply, since only our requests are on this
    /// connection; a reply to another id (an earlier request given up on) is skipped.
    public func awaitReply(id: Int) throws(ImgdClientError) -> ImgdReply {
        while true {
            guard case .line(let line, let descriptor) = try readLine(deadline: nil) else {
                throw .connectionLost(socket: socketPath)
            }
            switch try ImgdMessage(line: line) {
            case .event(let event):
                pendingEvents.append(event)
                if pendingEvents.count - pendingEventsStart > keptEventLimit { pendingEventsStart += 1 }
            case .reply(var reply):
                reply.descriptor = descriptor
                if reply.id.intValue == id { return reply }
                if reply.id == .null, !reply.isSuccess { return reply }
            }
        }
    }

    /// The next event: one kept while a reply was awaited, else the next event line read within
    /// `timeout` (nil: wait as long as it takes). Replies read meanwhile are dropped (nothing
    /// awaits them).
    public func nextEvent(timeout: Duration?) throws(ImgdClientError) -> EventWait {
        if pendingEventsStart < pendingEvents.count {
            let event = pendingEvents[pendingEventsStart]
            pendingEventsStart += 1
            if pendingEventsStart == pendingEvents.count {
                pendingEvents.removeAll(keepingCapacity: true)
                pendingEventsStart = 0
            }
            return .event(event)
        }
        let deadline = timeout.map { ContinuousClock.now + $0 }
        while true {
            switch try readLine(deadline: deadline) {
            case .timedOut:
                return .timedOut
            case .end:
                return .closed
            case .line(let line, _):
                if case .event(let event) = try ImgdMessage(line: line) {
                    return .event(event)
                }
            }
        }
    }

    // MARK: Stream mode

    /// Raw bytes after a stream command's reply line (`export`, `manifest`: Protocol.md,
    /// "Stream mode"): first those read with the line, then from the socket. 0 at the end.
    public func readRaw(into target: UnsafeMutableRawBufferPointer) throws(ImgdClientError) -> Int {
        if rawLeftover.isEmpty, buffer.hasUnread { rawLeftover = buffer.takeRemaining()[...] }
        if !rawLeftover.isEmpty {
            let count = min(target.count, rawLeftover.count)
            rawLeftover.withUnsafeBytes { target.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[0..<count])) }
            rawLeftover = rawLeftover.dropFirst(count)
            if rawLeftover.isEmpty { rawLeftover = [] }
            return count
        }
        if fileDescriptor < 0 || sawEndOfFile { return 0 }
        while true {
            let count = Glibc.read(fileDescriptor, target.baseAddress, target.count)
            if count >= 0 { return count }
            let code = errno
            if code == EINTR { continue }
            if code == ECONNRESET { return 0 }
            throw .local("reading from \(socketPath): \(Self.describe(code))")
        }
    }

    /// Sends raw bytes after a stream command's line (`import`).
    public func writeRaw(_ bytes: UnsafeRawBufferPointer) throws(ImgdClientError) {
        var failure: Int32 = 0
        do throws(WriteError) {
            try ImgdBase.writeAll(fileDescriptor, bytes, sendFlags: Int32(MSG_NOSIGNAL))
        } catch {
            failure = error.errno
        }
        if failure == EPIPE || failure == ECONNRESET { throw .connectionLost(socket: socketPath) }
        if failure != 0 { throw .local("writing to \(socketPath): \(Self.describe(failure))") }
    }

    /// Half-closes the connection: the daemon reads the end of an `import`'s bytes.
    public func finishWriting() {
        if fileDescriptor >= 0 { _ = shutdown(fileDescriptor, Int32(SHUT_WR)) }
    }

    // MARK: Reading and writing

    /// What ``readLine(deadline:)`` found.
    private enum ReadResult {
        /// A line, and the descriptor passed with it.
        case line([UInt8], ImgdDescriptor?)
        /// The daemon closed the connection after a complete line.
        case end
        /// The deadline passed first.
        case timedOut
    }

    /// The next line, the end of the stream, or the deadline passing (nil: no deadline).
    private func readLine(deadline: ContinuousClock.Instant?) throws(ImgdClientError) -> ReadResult {
        while true {
            if let line = buffer.nextLine() { return .line(line, buffer.takeLineDescriptor()) }
            if buffer.isOverLimit {
                throw .badReply("a line longer than \(Self.maximumLineLength) bytes")
            }
            if sawEndOfFile || fileDescriptor < 0 {
                // A line without its newline means the daemon stopped mid-reply.
                if buffer.hasPartialLine { throw .connectionLost(socket: socketPath) }
                return .end
            }
            if let deadline, try !waitReadable(until: deadline) {
                return .timedOut
            }
            let descriptor = fileDescriptor
            var passed: Int32 = -1, passedCount: Int32 = 0, truncated: Int32 = 0
            let count = chunk.withUnsafeMutableBytes {
                imgd_receive_with_descriptors(descriptor, $0.baseAddress, $0.count, &passed, 1, &passedCount, &truncated)
            }
            if truncated != 0 { lostDescriptors += 1 }
            if count < 0 {
                let code = errno
                if code == ECONNRESET {
                    sawEndOfFile = true
                    continue
                }
                throw .local("reading from \(socketPath): \(Self.describe(code))")
            }
            if count == 0 {
                sawEndOfFile = true
                continue
            }
            let received = chunk[0..<count]
            if passedCount > 0 {
                let owned = ImgdDescriptor(owning: passed)
                received.withUnsafeBytes { buffer.append($0, descriptor: owned) }
            } else {
                received.withUnsafeBytes { buffer.append($0) }
            }
        }
    }

    /// Waits until the socket has something to read (or was closed): true; false when the
    /// deadline passes first.
    private func waitReadable(until deadline: ContinuousClock.Instant) throws(ImgdClientError) -> Bool {
        while true {
            let left = ContinuousClock.now.duration(to: deadline)
            if left <= .zero { return false }
            let (seconds, attoseconds) = left.components
            // Rounded up, so a wait of 0.4 ms does not become a busy poll(0).
            let milliseconds = Int32(clamping: seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000)
            var descriptor = pollfd(fd: fileDescriptor, events: Int16(POLLIN), revents: 0)
            let ready = poll(&descriptor, 1, milliseconds)
            if ready < 0 {
                let code = errno
                if code == EINTR { continue }
                throw .local("waiting on \(socketPath): \(Self.describe(code))")
            }
            if ready > 0 { return true }
        }
    }

    /// Writes every byte, across partial writes and interruptions. `MSG_NOSIGNAL`: a daemon
    /// that went away gives EPIPE here, not a SIGPIPE that would kill imgctl without a message.
    private func writeAll(_ bytes: [UInt8]) throws(ImgdClientError) {
        var failure: Int32 = 0
        do throws(WriteError) {
            try ImgdBase.writeAll(fileDescriptor, bytes, sendFlags: Int32(MSG_NOSIGNAL))
        } catch {
            failure = error.errno
        }
        if failure == EPIPE || failure == ECONNRESET { throw .connectionLost(socket: socketPath) }
        if failure != 0 { throw .local("writing to \(socketPath): \(Self.describe(failure))") }
    }

    /// The system's wording for an errno: "No such file or directory".
    public static func describe(_ code: Int32) -> String {
        ImgdClientError.describe(code)
    }
}
