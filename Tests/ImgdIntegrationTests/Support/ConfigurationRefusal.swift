import Foundation
import ImgdTestSupport
import Testing

/// Starts the real `imgd` on a configuration file holding `text`, in a scratch folder of its
/// own, and expects the refusal a user can act on: exit status 2, the message naming the file
/// and the line (`<file>:<line>:`) and mentioning `mentions`, and nothing made on disk before it
/// (no `imgd-data/`).
func expectConfigurationRefused(
    _ text: String, line: Int, mentions: String, sourceLocation: SourceLocation = #_sourceLocation
) async throws {
    let scratch = try ScratchFolder()
    defer { scratch.remove() }
    try scratch.write("bad.toml", text)
    let file = scratch.path + "/bad.toml"
    let run = try await BinaryRunner.imgd(["--config", file], in: scratch.path, timeout: .seconds(30))
    #expect(run.status == 2, "exit status \(run.status):\n\(run.stderr)", sourceLocation: sourceLocation)
    #expect(
        run.stderr.contains("\(file):\(line):"), "the message does not name \(file):\(line):\n\(run.stderr)",
        sourceLocation: sourceLocation)
    #expect(run.stderr.contains(mentions), "the message does not mention \(mentions):\n\(run.stderr)", sourceLocation: sourceLocation)
    #expect(
        !FileManager.default.fileExists(atPath: scratch.path + "/imgd-data"), "imgd made its folders before refusing",
        sourceLocation: sourceLocation)
}
