#if canImport(Glibc)
import Glibc
#endif
import Testing

/// An unlinked temporary file for a test that feeds a `FileByteSource`: its descriptor is open
/// for reading and writing and closes when the value goes away.
final class ScratchFile {
    let descriptor: Int32

    init() throws {
        var template = Array("/tmp/imgd-validation-XXXXXX".utf8CString)
        let descriptor = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        try #require(descriptor >= 0, "mkstemp: errno \(errno)")
        template.withUnsafeBufferPointer { _ = unlink($0.baseAddress!) }
        self.descriptor = descriptor
    }

    deinit { close(descriptor) }
}
