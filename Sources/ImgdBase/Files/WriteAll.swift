#if canImport(Glibc)
import Glibc
#endif

/// Why ``writeAll(_:_:sendFlags:)`` stopped before the last byte: the `errno` of the call that
/// failed, and how many bytes had gone out before it (where a caller that waits and calls again
/// resumes).
public struct WriteError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The failed call's `errno`; `EIO` for a write that took nothing.
    public let errno: Int32
    /// Bytes written before the failure.
    public let written: Int

    public init(errno: Int32, written: Int) {
        self.errno = errno
        self.written = written
    }

    /// The system's wording and the count: "Broken pipe (errno 32) after 4096 bytes".
    public var description: String {
        "\(String(cString: strerror(errno))) (errno \(errno)) after \(written) bytes"
    }
}

/// Writes every byte of `bytes` to `descriptor`, or throws why it could not. The one write loop of
/// imgd and imgctl, with one stop condition:
///
/// - EINTR (a signal before anything was written) is retried (``retryingOnInterrupt(_:)``);
/// - a partial write goes on with the rest;
/// - any other failure ends it, EAGAIN included: a blocking descriptor never gives it, and a
///   caller whose descriptor is non-blocking by design waits for `POLLOUT` itself and calls again
///   with the bytes after ``WriteError/written``;
/// - a call that takes nothing from a non-empty buffer ends it as `EIO`: nothing says a second
///   call would do better, and retrying it would spin for ever.
///
/// `sendFlags`: for a socket, `send(2)` with these flags instead of `write(2)` — `MSG_NOSIGNAL`,
/// so a peer that went away is `EPIPE` here, not a `SIGPIPE` that ends the process.
public func writeAll(_ descriptor: Int32, _ bytes: UnsafeRawBufferPointer, sendFlags: Int32? = nil) throws(WriteError) {
    guard let base = bytes.baseAddress else { return }
    var written = 0
    while written < bytes.count {
        let result = retryingOnInterrupt {
            if let sendFlags {
                send(descriptor, base + written, bytes.count - written, sendFlags)
            } else {
                write(descriptor, base + written, bytes.count - written)
            }
        }
        if result < 0 { throw WriteError(errno: errno, written: written) }
        if result == 0 { throw WriteError(errno: EIO, written: written) }
        written += result
    }
}

/// ``writeAll(_:_:sendFlags:)`` for an array's bytes.
public func writeAll(_ descriptor: Int32, _ bytes: [UInt8], sendFlags: Int32? = nil) throws(WriteError) {
    let failure: WriteError? = bytes.withUnsafeBytes { raw in
        do throws(WriteError) {
            try writeAll(descriptor, raw, sendFlags: sendFlags)
            return nil
        } catch {
            return error
        }
    }
    if let failure { throw failure }
}
