import Foundation
import ImgdTestSupport
import Testing

/// Runs the real `imgd` executable that `swift build` put beside the test bundle.
enum BinaryRunner {
    /// The `imgd` built with the tests (the test target depends on it, so it is always there).
    static let imgdPath: String = {
        let here = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
        let beside = here.appendingPathComponent("imgd").path
        if FileManager.default.isExecutableFile(atPath: beside) { return beside }
        // Bundled runners may live one level down (…/debug/X.xctest/…).
        return here.deletingLastPathComponent().appendingPathComponent("imgd").path
    }()

    /// Runs `imgd` with `arguments` in `directory` (`environment` added to
    /// ``DaemonProcess/environment(adding:)``); kills it if it outlives `timeout`.
    static func imgd(
        _ arguments: [String], in directory: String, environment: [String: String] = [:], timeout: Duration = .seconds(60)
    ) async throws -> ChildProcess.Output {
        try await ChildProcess.run(
            imgdPath, arguments, in: directory,
            environment: DaemonProcess.environment(adding: environment), timeout: timeout)
    }

    /// The `imgctl` built beside `imgd`.
    static var imgctlPath: String {
        URL(fileURLWithPath: imgdPath).deletingLastPathComponent().appendingPathComponent("imgctl").path
    }

    /// The test process's environment without the service variables (`IMGD_SOCKET` would point
    /// imgctl elsewhere): ``DaemonProcess/environment(adding:)``.
    static var imgctlEnvironment: [String: String] { DaemonProcess.environment() }

    /// Runs `imgctl` with `arguments` in `directory` (in ``imgctlEnvironment`` unless given
    /// another); kills it if it outlives `timeout`.
    static func imgctl(
        _ arguments: [String], in directory: String, environment: [String: String] = imgctlEnvironment,
        timeout: Duration = .seconds(60)
    ) async throws -> ChildProcess.Output {
        try await ChildProcess.run(imgctlPath, arguments, in: directory, environment: environment, timeout: timeout)
    }

    /// Starts `imgd` and returns it running (output discarded), for tests that stop it by force.
    static func launch(_ arguments: [String], in directory: String) throws -> ChildProcess {
        try ChildProcess(imgdPath, arguments, in: directory, environment: DaemonProcess.environment())
    }
}
