import ImgdCore

@testable import ImgctlCLI

/// An ``OutputSink`` that keeps what was written, for a test to read.
final class CapturedOutput: OutputSink, Sendable {
    /// Guards the bytes: written by the command, read by the test (the same thread today, but
    /// nothing should depend on that).
    private let storage = Locked<[UInt8]>([])

    func write(_ bytes: [UInt8]) {
        storage.withLock { $0.append(contentsOf: bytes) }
    }

    var bytes: [UInt8] { storage.withLock { $0 } }
    var text: String { String(decoding: bytes, as: UTF8.self) }
    var lines: [String] { text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init).filter { !$0.isEmpty } }
}
