import ImgdCore
import Foundation
import ImgdTestSupport

#if canImport(Glibc)
import Glibc
#endif

/// A fake `NOTIFY_SOCKET`: a Unix datagram socket bound in a folder of the test's, collecting
/// every message a process sends with `sd_notify` (`READY=1`, `STATUS=…`, `WATCHDOG=1`, …).
///
/// One thread reads the socket for the socket's whole life, so a sender never finds the queue
/// full (a datagram sender blocks then); tests wait on the collected messages with a deadline.
final class NotifySocket: Sendable {
    /// The socket's path: the value for `NOTIFY_SOCKET`.
    let path: String
    private let descriptor: Int32
    /// A pipe whose write end wakes the reader thread at ``close()``.
    private let wake: (read: Int32, write: Int32)
    /// What the reader thread collects.
    private let inbox = Inbox()
    /// True until ``close()`` has run.
    private let open = Locked(true)

    /// Binds `folder/notify.sock` and starts reading it.
    init(in folder: String) throws {
        let path = folder + "/notify.sock"
        let descriptor = try Self.bind(path)
        var ends: [Int32] = [0, 0]
        guard pipe(&ends) == 0 else {
            let code = errno
            Glibc.close(descriptor)
            throw POSIXError(POSIXErrorCode(rawValue: code) ?? .EIO)
        }
        for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        self.path = path
        self.descriptor = descriptor
        wake = (ends[0], ends[1])
        let thread = Thread { [descriptor, wake, inbox] in
            Self.read(descriptor, wake: wake.read, into: inbox)
            inbox.finished.signal()
        }
        thread.name = "NotifySocket"
        thread.start()
    }

    /// A datagram socket bound at `path`.
    private static func bind(_ path: String) throws -> Int32 {
        let descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        guard let bound = (try? UnixSocketAddress(path: path))?.withSockaddr({ Glibc.bind(descriptor, $0, $1) }) else {
            Glibc.close(descriptor)
            throw POSIXError(.ENAMETOOLONG)
        }
        guard bound == 0 else {
            let code = errno
            Glibc.close(descriptor)
            throw POSIXError(POSIXErrorCode(rawValue: code) ?? .EIO)
        }
        return descriptor
    }

    deinit { close() }

    /// Stops reading and closes the socket (and removes its file). Calling it again does nothing.
    func close() {
        guard open.withLock({ open in defer { open = false }; return open }) else { return }
        var byte: UInt8 = 1
        _ = write(wake.write, &byte, 1)
        // The descriptors are closed only once the reader thread no longer polls them.
        _ = inbox.finished.wait(timeout: .now() + 5)
        Glibc.close(descriptor)
        Glibc.close(wake.read)
        Glibc.close(wake.write)
        unlink(path)
    }

    /// Every message so far, in order (one string per datagram; lines separated by `\n`).
    var messages: [String] { inbox.messages.withLock { $0 } }

    /// Every line of every message so far, in order (`READY=1`, `STATUS=…`).
    var lines: [String] { messages.flatMap { $0.split(separator: "\n").map(String.init) } }

    /// Waits until `condition` holds for the messages received so far; false if `timeout` passed.
    func wait(timeout: Duration = .seconds(10), until condition: ([String]) -> Bool) async -> Bool {
        await eventually(timeout: timeout) { condition(messages) }
    }

    /// Waits for a message, after the first `after` messages, that has the line `line`; returns
    /// its index in ``messages``, or nil if `timeout` passed first.
    func waitForMessage(withLine line: String, after: Int = 0, timeout: Duration = .seconds(10)) async -> Int? {
        var found: Int?
        _ = await wait(timeout: timeout) { messages in
            found = Self.index(ofLine: line, in: messages, after: after)
            return found != nil
        }
        return found
    }

    /// The index of the first message after the first `after` that has the line `line`.
    static func index(ofLine line: String, in messages: [String], after: Int = 0) -> Int? {
        guard after < messages.count else { return nil }
        return messages[after...].firstIndex { $0.split(separator: "\n").contains { $0 == line } }
    }

    /// The messages, shared by the reader thread (which appends) and the tests (which read).
    private final class Inbox: Sendable {
        /// Every datagram received, in order, as text.
        let messages = Locked<[String]>([])
        /// Signalled when the reader thread has returned.
        let finished = DispatchSemaphore(value: 0)
    }

    /// The reader thread's loop: each datagram becomes one string, until the wake pipe is written.
    private static func read(_ descriptor: Int32, wake: Int32, into inbox: Inbox) {
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            var descriptors = [
                pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0),
                pollfd(fd: wake, events: Int16(POLLIN), revents: 0),
            ]
            let ready = poll(&descriptors, 2, -1)
            if ready < 0 {
                if errno == EINTR { continue }
                return
            }
            if descriptors[1].revents != 0 { return }
            guard descriptors[0].revents & Int16(POLLIN) != 0 else { continue }
            let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            guard count >= 0 else {
                if errno == EINTR || errno == EAGAIN { continue }
                return
            }
            let text = String(decoding: buffer[..<count], as: UTF8.self)
            inbox.messages.withLock { $0.append(text) }
        }
    }
}
