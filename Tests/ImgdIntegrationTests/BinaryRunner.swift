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

    /// Runs `imgd` with `arguments` in `directory`; kills it if it outlives `timeout`.
    static func imgd(
        _ arguments: [String], in directory: String, environment: [String: String] = [:], timeout: Duration = .seconds(60)
    ) async throws -> ChildProcess.Output {
        try await ChildProcess.run(
            imgdPath, arguments, in: directory,
            environment: ProcessInfo.processInfo.environment.merging(environment) { $1 }, timeout: timeout)
    }

    /// The `imgctl` built beside `imgd`.
    static var imgctlPath: String {
        URL(fileURLWithPath: imgdPath).deletingLastPathComponent().appendingPathComponent("imgctl").path
    }

    /// The test process's environment without `IMGD_SOCKET`, which would point imgctl elsewhere.
    static var imgctlEnvironment: [String: String] {
        var environment = ProcessInfo.processInfo.environment
        environment["IMGD_SOCKET"] = nil
        return environment
    }

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
        try ChildProcess(imgdPath, arguments, in: directory)
    }
}

/// A scratch folder for one test, removed afterwards.
struct ScratchFolder {
    let path: String

    init() throws {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("imgd-it-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    func write(_ name: String, _ text: String) throws {
        try text.write(toFile: path + "/" + name, atomically: true, encoding: .utf8)
    }

    /// Regular files under `relative`, recursively, excluding the temp folder.
    func files(under relative: String) -> [String] {
        let root = path + "/" + relative
        let enumerator = FileManager.default.enumerator(atPath: root)
        var found: [String] = []
        while let item = enumerator?.nextObject() as? String {
            var isFolder: ObjCBool = false
            // Image files are in the fan-out folders; the root's own files (index, lock, layout
            // marker) and tmp/ are not images.
            if item.contains("/"), !item.hasPrefix("tmp/"), FileManager.default.fileExists(atPath: root + "/" + item, isDirectory: &isFolder), !isFolder.boolValue {
                found.append(item)
            }
        }
        return found
    }

    func remove() { try? FileManager.default.removeItem(atPath: path) }
}
