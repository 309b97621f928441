import Foundation
import ImgdTestSupport

#if canImport(Glibc)
import Glibc
#endif

extension DaemonProcess {
    /// A daemon (with `arguments`) whose socket, `imgd.sock` in `scratch`, group 65534 may use,
    /// the scratch folder searchable by it: for the tests that act as a second member
    /// (``OtherUser``).
    static func startShared(in scratch: ScratchFolder, _ arguments: [String] = []) async throws -> DaemonProcess {
        chmod(scratch.path, 0o755)
        let socket = scratch.path + "/imgd.sock"
        let daemon = try await DaemonProcess.start(in: scratch.path, arguments: ["--socket", socket] + arguments, socket: socket)
        try OtherUser.share(socket)
        return daemon
    }
}

/// `object` as one line of JSON, keys sorted, slashes unescaped: a request line.
func jsonLine(_ object: Any) -> String {
    String(decoding: try! JSONSerialization.data(withJSONObject: object, options: [.withoutEscapingSlashes, .sortedKeys]), as: UTF8.self)
}
