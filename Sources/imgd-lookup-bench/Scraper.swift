#if canImport(Glibc)
import Glibc
#endif
import ImgdCore

/// A metrics scraper on a thread of its own, beside the lookups: `--scrape-rate N` scrapes a
/// second, on a fixed schedule (a scrape that overruns its slot skips the slots it missed
/// rather than bursting to catch up), over one kept connection, each one timed, until the run
/// stops. It asks either the control socket (`{"cmd":"metrics"}`, one JSON line back) or an
/// HTTP URL (`GET` over HTTP/1.1 keep-alive, a `Content-Length` body), so a scrape costs the
/// daemon what Prometheus' would.
///
/// `@unchecked Sendable`: the main thread reads its results only after ``join()``.
final class Scraper: @unchecked Sendable {
    /// Where scrapes go.
    enum Target {
        /// The control socket at this path: the `metrics` command.
        case control(String)
        /// `http://HOST:PORT/PATH` with an IPv4 literal host.
        case http(host: String, port: UInt16, path: String)

        /// Parses `http://127.0.0.1:8090/metrics` (IPv4 literal, port required).
        init(url: String) throws(LookupBenchError) {
            guard url.hasPrefix("http://") else { throw .usage("--scrape-url wants http://HOST:PORT/PATH, not \(url)") }
            let rest = url.dropFirst("http://".count)
            let authority = rest.prefix { $0 != "/" }
            let path = rest.dropFirst(authority.count)
            let parts = authority.split(separator: ":")
            guard parts.count == 2, let port = UInt16(parts[1]), port > 0 else {
                throw .usage("--scrape-url needs an IPv4 address and a port (http://127.0.0.1:8090/metrics), not \(url)")
            }
            self = .http(host: String(parts[0]), port: port, path: path.isEmpty ? "/" : String(path))
        }
    }

    /// What a run of the scraper counted.
    struct Tally {
        var latencies = LatencyHistogram()
        var scrapes = 0
        /// Body bytes of the last scrape (the exposition's or the JSON's size).
        var lastBytes = 0
        var errors = 0
        var firstError: String?
    }

    let target: Target
    let rate: Double
    private let control: RunControl
    private var thread = pthread_t()
    private var socket: Int32 = -1
    private var buffer = [UInt8](repeating: 0, count: 1 << 20)
    private var filled = 0
    private var nextID = 1
    private(set) var tally = Tally()

    init(target: Target, rate: Double, control: RunControl) {
        self.target = target
        self.rate = rate
        self.control = control
    }

    deinit {
        if socket >= 0 { close(socket) }
    }

    func start() {
        let context = Unmanaged.passRetained(self).toOpaque()
        let status = pthread_create(&thread, nil, { context in
            let scraper = Unmanaged<Scraper>.fromOpaque(context!).takeRetainedValue()
            scraper.run()
            return nil
        }, context)
        precondition(status == 0, "pthread_create: \(String(cString: strerror(status)))")
    }

    func join() {
        pthread_join(thread, nil)
    }

    private func run() {
        let interval = UInt64(1e9 / rate)
        var next = monotonicNanoseconds()
        while control.current != .stopping {
            sleepUntil(next)
            let started = monotonicNanoseconds()
            do throws(ScrapeError) {
                tally.lastBytes = try scrape()
                tally.latencies.record(monotonicNanoseconds() &- started)
                tally.scrapes += 1
            } catch {
                tally.errors += 1
                tally.firstError = tally.firstError ?? error.text
                if socket >= 0 { close(socket) }
                socket = -1
                if tally.errors > 100 { return }  // the target is gone: stop hammering it
            }
            next += interval
            let now = monotonicNanoseconds()
            if next < now { next = now }
        }
    }

    private struct ScrapeError: Error {
        let text: String
    }

    /// One scrape; the body's size.
    private func scrape() throws(ScrapeError) -> Int {
        if socket < 0 { try connect() }
        switch target {
        case .control:
            let id = nextID
            nextID += 1
            try send(#"{"id":\#(id),"cmd":"metrics"}"# + "\n")
            let line = try readLine(terminator: [UInt8(ascii: "\n")])
            guard line.starts(with: Array(#"{"id":\#(id),"ok":true"#.utf8)) else {
                throw ScrapeError(text: "metrics answered: " + String(decoding: line.prefix(200), as: UTF8.self))
            }
            return line.count
        case .http(let host, let port, let path):
            try send("GET \(path) HTTP/1.1\r\nHost: \(host):\(port)\r\nAccept: text/plain\r\n\r\n")
            let head = String(decoding: try readLine(terminator: Array("\r\n\r\n".utf8)), as: UTF8.self).lowercased()
            guard head.hasPrefix("http/1."), head.dropFirst("http/1.x ".count).hasPrefix("200") else {
                throw ScrapeError(text: "GET \(path): " + String(head.prefix(200)))
            }
            guard let lengthLine = head.split(separator: "\r\n").first(where: { $0.hasPrefix("content-length:") }),
                let length = Int(lengthLine.dropFirst("content-length:".count).filter { $0 != " " && $0 != "\t" })
            else { throw ScrapeError(text: "GET \(path): no Content-Length (chunked bodies are not read)") }
            try readBody(length)
            // HTTP/1.0 closes unless it says keep-alive; HTTP/1.1 only when it says close.
            let closes = head.hasPrefix("http/1.0") ? !head.contains("connection: keep-alive") : head.contains("connection: close")
            if closes {
                close(socket)
                socket = -1
            }
            return length
        }
    }

    private func connect() throws(ScrapeError) {
        let descriptor: Int32
        switch target {
        case .control(let path):
            descriptor = Glibc.socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard descriptor >= 0 else { throw ScrapeError(text: "socket: \(String(cString: strerror(errno)))") }
            guard let address = try? UnixSocketAddress(path: path) else {
                close(descriptor)
                throw ScrapeError(text: "\(path): not a socket path")
            }
            let failure = address.connect(descriptor)
            guard failure == 0 else {
                close(descriptor)
                throw ScrapeError(text: "connect \(path): \(String(cString: strerror(failure)))")
            }
        case .http(let host, let port, _):
            descriptor = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard descriptor >= 0 else { throw ScrapeError(text: "socket: \(String(cString: strerror(errno)))") }
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = port.bigEndian
            guard inet_pton(AF_INET, host, &address.sin_addr) == 1 else {
                close(descriptor)
                throw ScrapeError(text: "\(host) is not an IPv4 address")
            }
            let status = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard status == 0 else {
                let reason = String(cString: strerror(errno))
                close(descriptor)
                throw ScrapeError(text: "connect \(host):\(port): \(reason)")
            }
            var one: Int32 = 1
            setsockopt(descriptor, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        }
        // A daemon that stops answering fails the scrape after 10 s instead of hanging the run.
        var timeout = timeval(tv_sec: ClientLoop.replyTimeoutSeconds, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        socket = descriptor
        filled = 0
    }

    private func send(_ text: String) throws(ScrapeError) {
        do throws(WriteError) {
            try writeAll(socket, Array(text.utf8), sendFlags: Int32(MSG_NOSIGNAL))
        } catch {
            throw ScrapeError(text: "send: \(String(cString: strerror(error.errno)))")
        }
    }

    /// Reads until `terminator`; returns what came before it and keeps what came after.
    private func readLine(terminator: [UInt8]) throws(ScrapeError) -> ArraySlice<UInt8> {
        var searchFrom = 0
        while true {
            if filled >= terminator.count {
                var index = searchFrom
                while index + terminator.count <= filled {
                    if buffer[index] == terminator[0], buffer[index..<(index + terminator.count)].elementsEqual(terminator) {
                        let line = buffer[0..<index]
                        let copy = Array(line)
                        consume(index + terminator.count)
                        return copy[...]
                    }
                    index += 1
                }
                searchFrom = max(0, filled - terminator.count + 1)
            }
            try fill()
        }
    }

    /// Reads and drops `length` body bytes (some may be in the buffer already).
    private func readBody(_ length: Int) throws(ScrapeError) {
        while filled < length { try fill() }
        consume(length)
    }

    private func consume(_ count: Int) {
        let rest = filled - count
        if rest > 0 {
            buffer.withUnsafeMutableBufferPointer { bytes in
                _ = memmove(bytes.baseAddress!, bytes.baseAddress! + count, rest)
            }
        }
        filled = rest
    }

    private func fill() throws(ScrapeError) {
        if filled == buffer.count { buffer.append(contentsOf: [UInt8](repeating: 0, count: buffer.count)) }
        let count = buffer.withUnsafeMutableBufferPointer { bytes in
            retryingOnInterrupt { recv(socket, bytes.baseAddress! + filled, bytes.count - filled, 0) }
        }
        if count > 0 {
            filled += count
            return
        }
        throw ScrapeError(text: count == 0 ? "the daemon closed the connection" : "recv: \(String(cString: strerror(errno)))")
    }

    private func sleepUntil(_ deadline: UInt64) {
        var time = timespec(tv_sec: Int(deadline / 1_000_000_000), tv_nsec: Int(deadline % 1_000_000_000))
        while clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &time, nil) == EINTR {}
    }
}
