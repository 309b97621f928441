import ImgdBase
import ImgdCore
import Foundation
import ImgdProtocol
import ImgdTestSupport
import Testing

@testable import ImgctlCLI

#if canImport(Glibc)
import Glibc
#endif

/// A tiny imgd stand-in on a Unix stream socket: it records every request line and answers
/// with whatever its script says — replies by id, event lines between them, lines split over
/// many writes, a closed connection.
///
/// It serves one connection at a time on a thread of its own (not Swift's cooperative pool), so
/// the synchronous client under test can block on it freely.
final class ScriptedControlServer: Sendable {
    /// One request as received.
    struct Request: Sendable {
        /// The line, exactly as sent.
        let raw: String
        let json: JSONValue
        var command: String { json["cmd"]?.stringValue ?? "" }
        var id: Int { json["id"]?.intValue ?? -1 }
        /// How many requests with this `cmd` came before, plus one.
        let ordinal: Int
    }

    /// What to send back.
    enum Action: Sendable {
        /// A line (a newline is added), in one write.
        case line(String)
        /// A line written one byte per write, so the client reads it in pieces.
        case drip(String)
        /// Raw bytes, with no newline added.
        case bytes([UInt8])
        /// Close the connection.
        case close
    }

    typealias Script = @Sendable (Request) -> [Action]

    /// The socket's path (under a fresh folder in /tmp: socket paths are limited to 107 bytes).
    let path: String
    let folder: String
    private let listener: Int32
    private let script: Script
    private let requests = Locked<[Request]>([])
    private let finished = DispatchSemaphore(value: 0)

    /// Starts listening; `greeting` is sent as soon as a client connects.
    init(greeting: [Action] = [], script: @escaping Script) throws {
        folder = try ScratchFolder("imgctl-test").path
        path = folder + "/imgd.sock"
        listener = try Self.listen(at: path)
        self.script = script
        let greetingActions = greeting
        Thread { [self] in
            self.acceptLoop(greeting: greetingActions)
            self.finished.signal()
        }.start()
    }

    /// The request lines received so far, in order.
    var received: [Request] { requests.withLock { $0 } }

    /// How long ``stop(sourceLocation:)`` waits for the serving thread: a client that keeps
    /// its connection open past this is a failed test, not a hung suite.
    static let stopDeadline: DispatchTimeInterval = .seconds(30)

    /// Stops accepting and removes the socket's folder. Call after the client is done (its
    /// connection closed), or the thread waits on it: past ``stopDeadline`` the test fails.
    func stop(sourceLocation: SourceLocation = #_sourceLocation) {
        // shutdown() wakes a thread blocked in accept() on Linux; close() alone would not.
        shutdown(listener, Int32(SHUT_RDWR))
        guard finished.wait(timeout: .now() + Self.stopDeadline) == .success else {
            // The thread still serves a connection; closing the listener now could let it
            // accept() on a descriptor number reused by someone else, so it is left open.
            Issue.record("the scripted server's connection was still open after \(Self.stopDeadline)", sourceLocation: sourceLocation)
            return
        }
        close(listener)
        try? FileManager.default.removeItem(atPath: folder)
    }

    /// `{"id":N,"ok":true,"result":RESULT}`.
    static func success(_ id: Int, _ result: String) -> String {
        "{\"id\":\(id),\"ok\":true,\"result\":\(result)}"
    }

    /// `{"id":N,"ok":false,"error":{"code":CODE,"message":MESSAGE}}`.
    static func failure(_ id: Int, _ code: String, _ message: String) -> String {
        "{\"error\":{\"code\":\"\(code)\",\"message\":\"\(message)\"},\"id\":\(id),\"ok\":false}"
    }

    /// `{"event":NAME,"seq":SEQ,"data":DATA}`.
    static func event(_ name: String, seq: Int, _ data: String) -> String {
        "{\"event\":\"\(name)\",\"seq\":\(seq),\"data\":\(data)}"
    }

    private static func listen(at path: String) throws -> Int32 {
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard (try? UnixSocketAddress(path: path))?.withSockaddr({ bind(descriptor, $0, $1) }) == 0, Glibc.listen(descriptor, 8) == 0 else {
            let code = errno
            close(descriptor)
            throw POSIXError(.init(rawValue: code)!)
        }
        return descriptor
    }

    private func acceptLoop(greeting: [Action]) {
        while true {
            let connection = accept(listener, nil, nil)
            if connection < 0 {
                if errno == EINTR { continue }
                return  // shut down
            }
            serve(connection, greeting: greeting)
            close(connection)
        }
    }

    private func serve(_ connection: Int32, greeting: [Action]) {
        guard perform(greeting, on: connection) else { return }
        var pending: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(connection, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { return }
            pending += chunk[0..<count]
            while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                let line = Array(pending[..<newline])
                pending.removeSubrange(...newline)
                let raw = String(decoding: line, as: UTF8.self)
                let request = requests.withLock { list in
                    let json = (try? JSONValue(parsing: line)) ?? .null
                    let command = json["cmd"]?.stringValue ?? ""
                    let ordinal = list.filter { $0.command == command }.count + 1
                    let request = Request(raw: raw, json: json, ordinal: ordinal)
                    list.append(request)
                    return request
                }
                guard perform(script(request), on: connection) else { return }
            }
        }
    }

    /// Sends `actions`; false once the connection is closed.
    private func perform(_ actions: [Action], on connection: Int32) -> Bool {
        for action in actions {
            switch action {
            case .line(let text):
                writeAll(Array((text + "\n").utf8), to: connection)
            case .drip(let text):
                for byte in Array((text + "\n").utf8) { writeAll([byte], to: connection) }
            case .bytes(let bytes):
                writeAll(bytes, to: connection)
            case .close:
                return false
            }
        }
        return true
    }

    private func writeAll(_ bytes: [UInt8], to connection: Int32) {
        // A failure: the client went away; the test will say what it saw.
        try? ImgdBase.writeAll(connection, bytes, sendFlags: Int32(MSG_NOSIGNAL))
    }
}
