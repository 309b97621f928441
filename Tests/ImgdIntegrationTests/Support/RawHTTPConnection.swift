import Foundation
import ImgdTestSupport

#if canImport(Glibc)
import Glibc
#endif

/// A bare HTTP/1.1 client on a socket, for what curl will not send: pipelined requests in one
/// write, malformed request lines, a head dripped a byte at a time, a body on a GET. It writes
/// exactly the bytes given and reads until the server closes (or a deadline passes).
final class RawHTTPConnection {
    /// One response read back: status, headers (names lower-cased) and body.
    struct Response: Sendable {
        let status: Int
        let headers: [String: String]
        let body: [UInt8]

        func header(_ name: String) -> String? { headers[name.lowercased()] }
    }

    private let fd: Int32

    /// Connects to `address`: `unix:PATH` or `HOST:PORT` (IPv4).
    init(_ address: String) throws {
        if address.hasPrefix("unix:") {
            fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
            var addr = sockaddr_un()
            addr.sun_family = sa_family_t(AF_UNIX)
            let path = Array(address.dropFirst(5).utf8)
            withUnsafeMutableBytes(of: &addr.sun_path) { raw in
                for (index, byte) in path.enumerated() { raw[index] = byte }
            }
            let connected = withUnsafePointer(to: &addr) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
            }
            guard connected == 0 else { throw RawHTTPError(message: "connect \(address): errno \(errno)") }
        } else {
            let colon = address.lastIndex(of: ":")!
            fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var addr = sockaddr_in()
            addr.sin_family = sa_family_t(AF_INET)
            addr.sin_port = in_port_t(UInt16(address[address.index(after: colon)...])!).bigEndian
            inet_pton(AF_INET, String(address[..<colon]), &addr.sin_addr)
            let connected = withUnsafePointer(to: &addr) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard connected == 0 else { throw RawHTTPError(message: "connect \(address): errno \(errno)") }
        }
        var timeout = timeval(tv_sec: 30, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit { close(fd) }

    /// Writes `text`'s bytes.
    func send(_ text: String) throws {
        try send(Array(text.utf8))
    }

    func send(_ bytes: [UInt8]) throws {
        var sent = 0
        while sent < bytes.count {
            let wrote = bytes[sent...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard wrote > 0 else { throw RawHTTPError(message: "send: errno \(errno)") }
            sent += wrote
        }
    }

    /// Everything the server sends until it closes the connection (or 30 s pass without a byte).
    func readUntilClosed() -> [UInt8] {
        var all: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let got = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard got > 0 else { return all }
            all += buffer[0..<got]
        }
    }

    /// Reads one whole response (its head, then as many body bytes as its `Content-Length`
    /// says; none for a HEAD or a 304); nil when the connection closed or 30 s passed first.
    func readResponse(toHead: Bool = false) -> Response? {
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            if let end = pending.firstRange(of: Array("\r\n\r\n".utf8)) {
                let head = String(decoding: pending[..<end.lowerBound], as: UTF8.self).lowercased()
                let length = head.components(separatedBy: "\r\n").first { $0.hasPrefix("content-length:") }
                    .flatMap { Int($0.dropFirst(15).trimmingCharacters(in: .whitespaces)) } ?? 0
                let status = head.hasPrefix("http/1.1 304") || toHead ? 0 : length
                if pending.count - end.upperBound >= status {
                    let whole = Array(pending[..<(end.upperBound + status)])
                    pending.removeFirst(end.upperBound + status)
                    return Self.responses(whole, headRequests: toHead ? [0] : []).first
                }
            }
            let got = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard got > 0 else { return nil }
            pending += buffer[0..<got]
        }
    }

    private var pending: [UInt8] = []

    /// Whether the server closed the connection (a read returns 0) within `timeout`.
    func isClosedByServer(within timeout: Duration) -> Bool {
        var pollFD = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let millis = Int32(timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000)
        guard poll(&pollFD, 1, millis) == 1 else { return false }
        var byte: UInt8 = 0
        return recv(fd, &byte, 1, Int32(MSG_PEEK)) == 0
    }

    /// The responses in `bytes`, in order; `headRequests` marks which answered a HEAD (no body).
    static func responses(_ bytes: [UInt8], headRequests: Set<Int> = []) -> [Response] {
        var responses: [Response] = []
        var rest = bytes[...]
        let separator: [UInt8] = Array("\r\n\r\n".utf8)
        while !rest.isEmpty {
            guard let end = rest.firstRange(of: separator) else { break }
            let head = String(decoding: rest[..<end.lowerBound], as: UTF8.self)
            rest = rest[end.upperBound...]
            var lines = head.components(separatedBy: "\r\n")
            let statusLine = lines.removeFirst().split(separator: " ")
            let status = statusLine.count > 1 ? Int(statusLine[1]) ?? 0 : 0
            var headers: [String: String] = [:]
            for line in lines {
                guard let colon = line.firstIndex(of: ":") else { continue }
                headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            }
            var length = Int(headers["content-length"] ?? "0") ?? 0
            if headRequests.contains(responses.count) || status == 304 { length = 0 }
            let body = Array(rest.prefix(length))
            rest = rest.dropFirst(length)
            responses.append(Response(status: status, headers: headers, body: body))
        }
        return responses
    }
}

struct RawHTTPError: Error, CustomStringConvertible {
    let message: String
    var description: String { message }
}
