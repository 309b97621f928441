import Foundation
import ImgdTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// One connection to the control socket kept across requests (each call runs off the pool).
final class KeptConnection: Sendable {
    private let client: UncheckedBox<ControlClient>
    /// Serialises the calls: the client is used by one thread at a time.
    private let queue = DispatchQueue(label: "KeptConnection")

    init(_ socket: String) async throws {
        client = try await onOwnThread { Result { UncheckedBox(try ControlClient(path: socket)) } }.get()
    }

    /// Sends `line` and returns the next reply, parsed.
    func call(_ line: String) async throws -> [String: Any] {
        try Self.parseReply(try await callRaw(line))
    }

    /// Sends `line` and returns the next reply as sent.
    func callRaw(_ line: String) async throws -> String {
        try await run { try $0.call(line) }
    }

    /// The `result` of a successful request (fails the test otherwise).
    func result(_ line: String, sourceLocation: SourceLocation = #_sourceLocation) async throws -> [String: Any] {
        let reply = try await call(line)
        #expect(reply["ok"] as? Bool == true, "reply: \(reply)", sourceLocation: sourceLocation)
        return reply["result"] as? [String: Any] ?? [:]
    }

    /// Writes a line of `bytes` bytes (a JSON object padded with a long string) without
    /// `SIGPIPE` — the daemon closes the connection part-way — then reads the reply.
    func sendOversizedLine(bytes: Int) async throws -> [String: Any] {
        let reply = try await run { client in
            var timeout = timeval(tv_sec: 30, tv_usec: 0)
            setsockopt(client.fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            let head = Array(#"{"cmd":"ping","pad":""#.utf8)
            let tail = Array(#""}"#.utf8) + [0x0A]
            var line = head + [UInt8](repeating: UInt8(ascii: "a"), count: max(0, bytes - head.count - tail.count))
            line += tail
            var offset = 0
            while offset < line.count {
                let sent = line[offset...].withUnsafeBytes { send(client.fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                if sent < 0, errno == EINTR { continue }
                guard sent > 0 else { break }  // EPIPE or ECONNRESET: the daemon closed its side
                offset += sent
            }
            return try client.readLine()
        }
        return try Self.parseReply(reply)
    }

    /// True when the daemon closes the connection (end of file or a reset) within `timeout`.
    func isClosedByPeer(timeout: Duration = .seconds(10)) async -> Bool {
        let milliseconds = Int32(timeout.components.seconds * 1000)
        return (try? await run { client -> Bool in
            var descriptor = pollfd(fd: client.fd, events: Int16(POLLIN), revents: 0)
            guard Glibc.poll(&descriptor, 1, milliseconds) == 1 else { return false }
            var byte: UInt8 = 0
            let got = recv(client.fd, &byte, 1, Int32(MSG_DONTWAIT))
            return got == 0 || (got < 0 && errno == ECONNRESET)
        }) ?? false
    }

    private func run<T: Sendable>(_ body: @escaping @Sendable (ControlClient) throws -> T) async throws -> T {
        let client = self.client
        let queue = self.queue
        return try await withCheckedThrowingContinuation { continuation in
            queue.async { continuation.resume(with: Result { try body(client.value) }) }
        }
    }

    /// `reply` parsed as a JSON object (throws otherwise).
    static func parseReply(_ reply: String) throws -> [String: Any] {
        guard let object = try JSONSerialization.jsonObject(with: Data(reply.utf8)) as? [String: Any] else {
            throw DaemonError(message: "not a JSON object: \(reply)")
        }
        return object
    }
}
