import Foundation
import Testing

/// Runs the real `imgd` executable that `swift build` put beside the test bundle.
enum BinaryRunner {
    struct Output {
        let status: Int32
        let stdout: String
        let stderr: String
    }

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
    ) async throws -> Output {
        let process = Process()
        if !environment.isEmpty {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        }
        process.executableURL = URL(fileURLWithPath: imgdPath)
        process.arguments = arguments
        process.currentDirectoryURL = URL(fileURLWithPath: directory)
        let stdout = Pipe()
        let stderr = Pipe()
        process.standardOutput = stdout
        process.standardError = stderr
        process.standardInput = FileHandle.nullDevice
        let exited = AsyncStream<Void>.makeStream()
        process.terminationHandler = { _ in exited.continuation.finish() }
        try process.run()
        // Read both pipes while it runs, so a chatty child never blocks on a full pipe — on
        // Dispatch threads: a blocking read on Swift's cooperative pool (2 threads here) would
        // starve every other test running meanwhile.
        let outReader = stdout.fileHandleForReading, errReader = stderr.fileHandleForReading
        async let out = offPool { (try? outReader.readToEnd()) ?? Data() }
        async let err = offPool { (try? errReader.readToEnd()) ?? Data() }
        let watchdog = Task {
            try await Task.sleep(for: timeout)
            process.terminate()
        }
        for await _ in exited.stream {}
        watchdog.cancel()
        let outData = await out
        let errData = await err
        return Output(
            status: process.terminationStatus,
            stdout: String(decoding: outData, as: UTF8.self),
            stderr: String(decoding: errData, as: UTF8.self))
    }
}

/// Runs blocking work on a Dispatch thread instead of Swift's cooperative pool.
func offPool<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        DispatchQueue.global().async { continuation.resume(returning: work()) }
    }
}

extension Process {
    /// Waits for the process to exit without holding a cooperative-pool thread.
    func exited() async {
        let process = UncheckedProcess(process: self)
        await offPool { process.process.waitUntilExit() }
    }
}

/// `Process` is not `Sendable`; waiting on it from one other thread is safe.
private struct UncheckedProcess: @unchecked Sendable {
    let process: Process
}

extension BinaryRunner {
    /// Starts `imgd` and returns it running (output discarded), for tests that stop it by force.
    static func launch(_ arguments: [String], in directory: String) throws -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: imgdPath)
        process.arguments = arguments
        process.currentDirectoryURL = URL(fileURLWithPath: directory)
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        try process.run()
        return process
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
            if !item.hasPrefix("tmp"), !item.hasPrefix("index.sqlite"), item != "lock", FileManager.default.fileExists(atPath: root + "/" + item, isDirectory: &isFolder), !isFolder.boolValue {
                found.append(item)
            }
        }
        return found
    }

    func remove() { try? FileManager.default.removeItem(atPath: path) }
}
