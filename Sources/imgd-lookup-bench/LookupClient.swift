#if canImport(Glibc)
import Glibc
#endif
import ImgdCore

/// One connection to the control socket, driven by a ``ClientLoop``: it keeps `depth` `get`
/// requests in flight (1: send, wait for the reply, send the next), checks every reply by its
/// bytes, and times each request from the write that sent it to the read that returned its reply.
///
/// Cheap on purpose, so the client is not what limits the rate: the send and receive buffers
/// are allocated once; a request is a copy of its prebuilt bytes behind a formatted id; a reply
/// is found with `memchr` and checked by comparing bytes, never decoded as JSON; every reply
/// that one `read` returns is answered with one `send` of as many new requests.
///
/// `@unchecked Sendable`: the main thread uses a client only before its loop starts and after
/// the loop's thread has been joined; in between, only that thread does (pthread_create and
/// pthread_join order those accesses).
final class LookupClient: @unchecked Sendable {
    /// What a run of one client counted.
    struct Tally {
        var latencies = LatencyHistogram()
        /// Replies counted while measuring.
        var measured = 0
        /// Replies (measured or not) that were hits served from the memory tier, and from disk.
        var memoryHits = 0
        var diskHits = 0
        /// Replies that were not a hit (a miss, an error, a reply out of order) and broken connections.
        var errors = 0
        /// The first thing that went wrong, for the report.
        var firstError: String?
        /// When this client counted its quota (with `--requests`), in monotonic nanoseconds.
        var finishedAt: UInt64 = 0
    }

    /// Replies over this size are a failure of the run (a hit's reply is about 300 bytes).
    static let receiveCapacity = 64 * 1024

    /// The non-blocking socket, for the loop's epoll set.
    let socket: Int32
    private let table: RequestTable
    private let control: RunControl
    private let depth: Int
    /// Replies to count before stopping by itself (`--requests`), or nil to run until told to stop.
    private let quota: Int?
    private let order: BenchOptions.Order
    /// The URL the next request asks for (round-robin), or the random generator's state.
    private var cursor: UInt64

    private let sendBuffer: UnsafeMutablePointer<UInt8>
    private let sendCapacity: Int
    private let receiveBuffer: UnsafeMutablePointer<UInt8>
    /// When each request in flight was sent, by id modulo `depth`.
    private let sentAt: UnsafeMutablePointer<UInt64>

    private var nextID = 0  // id of the next request to send
    private var answeredID = 0  // id of the next reply owed
    private var filled = 0  // bytes in receiveBuffer
    private var measuring = false
    private var sending = true
    /// Every reply owed has arrived after sending stopped, or the connection failed.
    private(set) var isFinished = false
    private(set) var tally = Tally()

    /// Connects to the socket at `path`; requests start with ``begin()``.
    init(
        path: String, index: Int, clients: Int, table: RequestTable, control: RunControl, depth: Int,
        quota: Int?, order: BenchOptions.Order
    ) throws(LookupBenchError) {
        socket = Self.connect(to: path)
        guard socket >= 0 else { throw .cannotConnect(path, String(cString: strerror(errno))) }
        self.table = table
        self.control = control
        self.depth = depth
        self.quota = quota
        self.order = order
        switch order {
        case .roundRobin: cursor = UInt64(index * table.count / clients)
        case .random: cursor = 0x9E37_79B9_7F4A_7C15 &* UInt64(index + 1)  // nonzero, different per client
        }
        // `{"id":` and up to 20 digits in front of each tail.
        sendCapacity = depth * (table.longest + 32)
        sendBuffer = .allocate(capacity: sendCapacity)
        receiveBuffer = .allocate(capacity: Self.receiveCapacity)
        sentAt = .allocate(capacity: depth)
        sentAt.initialize(repeating: 0, count: depth)
    }

    deinit {
        close(socket)
        sendBuffer.deallocate()
        receiveBuffer.deallocate()
        sentAt.deallocate()
    }

    // MARK: - Driven by the loop

    /// Sends the first `depth` requests.
    func begin() {
        var queued = 0
        for _ in 0..<depth {
            queued += writeRequest(id: nextID, at: sendBuffer + queued)
            nextID += 1
        }
        flush(queued, ids: 0..<nextID)
    }

    /// The socket is readable: takes what arrived, checks and counts the complete replies, and
    /// sends one new request for each while the run goes on.
    func readable() {
        guard !isFinished else { return }
        let count = recv(socket, receiveBuffer + filled, Self.receiveCapacity - filled, 0)
        if count < 0, errno == EAGAIN || errno == EINTR { return }
        guard count > 0 else {
            fail(count == 0 ? "the daemon closed the connection" : "recv: \(String(cString: strerror(errno)))")
            isFinished = true
            return
        }
        let arrived = monotonicNanoseconds()
        filled += count
        if sending {
            switch control.current {
            case .warmingUp: measuring = false
            case .measuring: measuring = true
            case .stopping: measuring = false; sending = false
            }
        }

        var queued = 0
        let firstNewID = nextID
        var lineStart = 0
        while let newline = memchr(receiveBuffer + lineStart, Int32(UInt8(ascii: "\n")), filled - lineStart) {
            let lineEnd = receiveBuffer.distance(to: newline.assumingMemoryBound(to: UInt8.self))
            check(UnsafeBufferPointer(start: receiveBuffer + lineStart, count: lineEnd - lineStart), id: answeredID)
            if measuring {
                tally.latencies.record(arrived &- sentAt[answeredID % depth])
                tally.measured += 1
                if let quota, tally.measured >= quota {
                    tally.finishedAt = arrived
                    measuring = false
                    sending = false
                }
            }
            answeredID += 1
            lineStart = lineEnd + 1
            if sending {
                queued += writeRequest(id: nextID, at: sendBuffer + queued)
                nextID += 1
            }
        }
        // Keep the part of a reply not yet complete at the start of the buffer.
        if lineStart > 0 {
            filled -= lineStart
            if filled > 0 { memmove(receiveBuffer, receiveBuffer + lineStart, filled) }
        } else if filled == Self.receiveCapacity {
            fail("a reply line over \(Self.receiveCapacity) bytes")
            isFinished = true
            return
        }
        if queued > 0 { flush(queued, ids: firstNewID..<nextID) }
        if answeredID == nextID && !sending { isFinished = true }
    }

    /// The loop saw nothing from any connection for its reply timeout.
    func timedOut(after seconds: Int) {
        guard !isFinished else { return }
        fail("no reply for \(seconds) s: the daemon stopped answering")
        isFinished = true
    }

    /// Writes `{"id":ID` and the next URL's tail at `target`; returns the bytes written.
    private func writeRequest(id: Int, at target: UnsafeMutablePointer<UInt8>) -> Int {
        let prefix: StaticString = #"{"id":"#
        memcpy(target, prefix.utf8Start, prefix.utf8CodeUnitCount)
        var length = prefix.utf8CodeUnitCount
        length += writeDecimal(id, at: target + length)
        let url = nextURL()
        table.bytes.withUnsafeBufferPointer { bytes in
            let start = table.starts[url]
            let tail = table.starts[url + 1] - start
            memcpy(target + length, bytes.baseAddress! + start, tail)
            length += tail
        }
        return length
    }

    private func writeDecimal(_ value: Int, at target: UnsafeMutablePointer<UInt8>) -> Int {
        var digits = 1
        var rest = value / 10
        while rest > 0 { digits += 1; rest /= 10 }
        rest = value
        for position in stride(from: digits - 1, through: 0, by: -1) {
            target[position] = UInt8(ascii: "0") + UInt8(rest % 10)
            rest /= 10
        }
        return digits
    }

    private func nextURL() -> Int {
        let count = UInt64(table.count)
        switch order {
        case .roundRobin:
            let url = cursor % count
            cursor = url + 1
            return Int(url)
        case .random:
            // xorshift64*: fast and good enough to spread requests over the URLs.
            cursor ^= cursor >> 12
            cursor ^= cursor << 25
            cursor ^= cursor >> 27
            return Int((cursor &* 0x2545_F491_4F6C_DD1D) % count)
        }
    }

    /// Sends the `count` queued bytes and stamps the requests `ids` as sent now. The requests
    /// in flight are far smaller than a socket buffer, so a full one (the daemon not reading)
    /// is waited out right here rather than through the loop.
    private func flush(_ count: Int, ids: Range<Int>) {
        let now = monotonicNanoseconds()
        for id in ids { sentAt[id % depth] = now }
        var sent = 0
        while sent < count {
            do throws(WriteError) {
                // MSG_NOSIGNAL: a daemon that closed the connection is a counted error, not SIGPIPE.
                try writeAll(socket, UnsafeRawBufferPointer(start: sendBuffer + sent, count: count - sent), sendFlags: Int32(MSG_NOSIGNAL))
                sent = count
            } catch where error.errno == EAGAIN {
                // The socket is non-blocking (the loop polls it): wait here for room, then send the rest.
                sent += error.written
                var writable = pollfd(fd: socket, events: Int16(POLLOUT), revents: 0)
                if poll(&writable, 1, Int32(ClientLoop.replyTimeoutSeconds * 1000)) > 0 { continue }
                fail("send: the daemon has not read a request for \(ClientLoop.replyTimeoutSeconds) s")
                isFinished = true
                return
            } catch {
                fail("send: \(String(cString: strerror(error.errno)))")
                isFinished = true
                return
            }
        }
    }

    // MARK: - Checking a reply

    /// A hit's reply (keys sorted, as imgd writes them):
    /// `{"id":7,"ok":true,"result":{"bytes":…,"source":"memory","width":64}}`.
    /// It must carry the id of the oldest request in flight (replies come in request order)
    /// and a source of memory or disk; anything else (a miss, an error, network) is counted.
    private func check(_ line: UnsafeBufferPointer<UInt8>, id: Int) {
        let idPrefix: StaticString = #"{"id":"#
        let okPrefix: StaticString = #","ok":true,"#
        var position = 0
        guard matches(idPrefix, in: line, at: &position) else { return fail(line) }
        var value = 0
        let digitsStart = position
        while position < line.count, line[position] >= UInt8(ascii: "0"), line[position] <= UInt8(ascii: "9") {
            value = value * 10 + Int(line[position] - UInt8(ascii: "0"))
            position += 1
        }
        guard position > digitsStart, value == id, matches(okPrefix, in: line, at: &position) else { return fail(line) }
        // "source" is the second-to-last key of the result: look for it from the end.
        let sourceKey: StaticString = #""source":""#
        var start = line.count - sourceKey.utf8CodeUnitCount
        while start > position {
            var at = start
            if matches(sourceKey, in: line, at: &at) {
                if matches("memory\"", in: line, at: &at) {
                    tally.memoryHits += 1
                    return
                }
                if matches("disk\"", in: line, at: &at) {
                    tally.diskHits += 1
                    return
                }
                break
            }
            start -= 1
        }
        fail(line)
    }

    /// True when `line` holds `expected` at `position`, which then moves past it.
    private func matches(_ expected: StaticString, in line: UnsafeBufferPointer<UInt8>, at position: inout Int) -> Bool {
        let length = expected.utf8CodeUnitCount
        guard position + length <= line.count, memcmp(line.baseAddress! + position, expected.utf8Start, length) == 0 else {
            return false
        }
        position += length
        return true
    }

    private func fail(_ line: UnsafeBufferPointer<UInt8>) {
        fail("unexpected reply: " + String(decoding: line.prefix(300), as: UTF8.self))
    }

    private func fail(_ reason: String) {
        tally.errors += 1
        if tally.firstError == nil { tally.firstError = reason }
    }

    // MARK: - Connecting

    /// A non-blocking AF_UNIX stream socket connected to `path`; -1 and errno on failure.
    private static func connect(to path: String) -> Int32 {
        let descriptor = Glibc.socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { return -1 }
        guard let address = try? UnixSocketAddress(path: path) else {
            close(descriptor)
            errno = ENAMETOOLONG
            return -1
        }
        let failure = address.connect(descriptor)
        guard failure == 0 else {
            close(descriptor)
            errno = failure
            return -1
        }
        _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)
        return descriptor
    }
}
