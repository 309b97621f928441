#if canImport(Glibc)
import Glibc
#endif
import ImgdBase

/// An ``OutputSink`` over a file descriptor (stdout, stderr), unbuffered: each write reaches the
/// descriptor at once, so `imgctl watch | grep` sees every event as it happens.
public final class FileDescriptorOutput: OutputSink {
    /// The descriptor written to; not owned (never closed here).
    public let fileDescriptor: Int32

    public init(_ fileDescriptor: Int32) {
        self.fileDescriptor = fileDescriptor
    }

    /// Whether the descriptor is a terminal (progress bars and redrawing only there).
    public var isTerminal: Bool { isatty(fileDescriptor) == 1 }

    public func write(_ bytes: [UInt8]) {
        // A failure means the reader is gone (EPIPE, a closed descriptor): nothing left to tell it.
        try? writeAll(fileDescriptor, bytes)
    }
}
