import Foundation
import ImgdFuzz
import ImgdTestSupport
import Testing

/// Every committed seed (`Tests/Fuzz/Corpus/<target>/`) and every reproducer of a finding
/// (`Tests/Fuzz/Regressions/<target>/`) run through its fuzz target as `make fuzz` runs them:
/// a fixed finding that comes back fails here, in `make test`, without the fuzzer.
@Suite("Fuzz corpora replayed", .timeLimit(.minutes(5)), .offThePool)
struct FuzzCorpusReplayTests {
    static let fuzzFolder = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Fuzz")

    /// The files of `kind` (Corpus or Regressions) for `target`.
    static func inputs(_ kind: String, of target: FuzzTarget) throws -> [URL] {
        let folder = fuzzFolder.appendingPathComponent(kind).appendingPathComponent(target.rawValue)
        guard FileManager.default.fileExists(atPath: folder.path) else { return [] }
        return try FileManager.default.contentsOfDirectory(at: folder, includingPropertiesForKeys: nil)
            .filter { !$0.lastPathComponent.hasPrefix(".") }
            .sorted { $0.lastPathComponent < $1.lastPathComponent }
    }

    @Test("every target has a seed corpus of small files", arguments: FuzzTarget.allCases)
    func seedCorpus(target: FuzzTarget) throws {
        let seeds = try Self.inputs("Corpus", of: target)
        #expect(seeds.count >= 5, "\(target.rawValue) has \(seeds.count) seeds")
        for seed in seeds {
            let size = try Data(contentsOf: seed).count
            #expect(size <= 64 * 1024, "\(seed.lastPathComponent) is \(size) bytes")
        }
    }

    @Test("fuzz.sh fuzzes every target by default (make fuzz, and CI's smoke)")
    func fuzzScriptNamesEveryTarget() throws {
        let script = try String(contentsOf: Self.fuzzFolder.appendingPathComponent("fuzz.sh"), encoding: .utf8)
        let line = try #require(script.split(separator: "\n").first { $0.hasPrefix("FUZZ_TARGETS=${FUZZ_TARGETS:-") })
        let named = Set(line.dropFirst("FUZZ_TARGETS=${FUZZ_TARGETS:-".count).dropLast().split(separator: " ").map(String.init))
        #expect(named == Set(FuzzTarget.allCases.map(\.rawValue)))
    }

    @Test("seeds and reproducers run clean", arguments: FuzzTarget.allCases)
    func replay(target: FuzzTarget) throws {
        for input in try Self.inputs("Corpus", of: target) + Self.inputs("Regressions", of: target) {
            let bytes = [UInt8](try Data(contentsOf: input))
            #expect(throws: Never.self, "\(input.lastPathComponent)") { try target.run(bytes) }
        }
    }
}
