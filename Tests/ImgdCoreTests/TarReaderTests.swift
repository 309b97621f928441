import Foundation
import ImgdCore
import Testing

/// The warm set's ustar reader and writer (`imgctl export`/`import`).
@Suite("TarReader and TarHeader")
struct TarReaderTests {
    /// Members as (name, bytes), or the error, from `stream` fed in pieces of `piece` bytes.
    static func read(_ stream: [UInt8], piece: Int = .max, limit: Int = 1 << 20) -> (members: [(String, [UInt8], Bool)], error: TarError?) {
        var reader = TarReader(maxMemberBytes: limit)
        var members: [(String, [UInt8], Bool)] = []
        do {
            var offset = 0
            while offset < stream.count {
                let end = min(stream.count, offset + piece)
                try stream[offset..<end].withUnsafeBytes { buffer in
                    try reader.feed(buffer) { event in
                        switch event {
                        case .member(let name, _, let regular): members.append((name, [], regular))
                        case .data(let bytes): members[members.count - 1].1 += bytes
                        case .memberEnd: break
                        }
                    }
                }
                offset = end
            }
            try reader.finish()
            return (members, nil)
        } catch let error as TarError {
            return (members, error)
        } catch {
            Issue.record("unexpected \(error)")
            return (members, nil)
        }
    }

    static func archive(_ members: [(String, [UInt8])]) -> [UInt8] {
        var stream: [UInt8] = []
        for (name, bytes) in members {
            stream += TarHeader.regularFile(name: name, size: bytes.count, modified: 1_700_000_000)
            stream += bytes + [UInt8](repeating: 0, count: TarHeader.padding(after: bytes.count))
        }
        return stream + TarHeader.endOfArchive
    }

    static let sample: [(String, [UInt8])] = [
        ("imgd-manifest.jsonl", Array("{\"key\":\"x\"}\n".utf8)), ("a", Array(repeating: 7, count: 512)), ("b", Array(0..<200)), ("empty", []),
    ]

    @Test("what TarHeader writes reads back the same, whole and a byte at a time")
    func roundTrip() {
        let stream = Self.archive(Self.sample)
        for piece in [1, 7, 512, .max] {
            let read = Self.read(stream, piece: piece)
            #expect(read.error == nil)
            #expect(read.members.map(\.0) == Self.sample.map(\.0) && read.members.map(\.1) == Self.sample.map(\.1), "piece \(piece)")
        }
    }

    @Test("GNU tar lists what TarHeader writes, and the reader reads GNU tar's ustar, gnu and pax archives")
    func gnuTar() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("tar-\(getpid())-\(UInt32.random(in: 0...UInt32.max))").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try Data(Self.archive(Self.sample)).write(to: URL(fileURLWithPath: folder + "/ours.tar"))
        let listed = try run("/usr/bin/tar", ["-tvf", folder + "/ours.tar"])
        #expect(listed.split(separator: "\n").map { String($0.split(separator: " ").last!) } == Self.sample.map(\.0), "\(listed)")

        try Data(Array(0..<255)).write(to: URL(fileURLWithPath: folder + "/file"))
        let long = String(repeating: "n", count: 150)
        try Data([1, 2, 3]).write(to: URL(fileURLWithPath: folder + "/" + long))
        for format in ["ustar", "gnu", "posix"] {
            let names = format == "ustar" ? ["file"] : ["file", long]
            _ = try run("/usr/bin/tar", ["--format=\(format)", "-C", folder, "-cf", folder + "/\(format).tar"] + names)
            let read = Self.read(Array(try Data(contentsOf: URL(fileURLWithPath: folder + "/\(format).tar"))), piece: 100)
            #expect(read.error == nil, "\(format): \(String(describing: read.error))")
            #expect(read.members.map(\.0) == names, "\(format)")
            #expect(read.members.first?.1 == Array(0..<255), "\(format)")
        }
    }

    @Test("a flipped header byte is a bad checksum; a cut inside a member or before the end blocks is truncated; a member over the limit is refused at its header")
    func refusals() {
        var stream = Self.archive(Self.sample)
        stream[512 + 512 + 30] ^= 1  // inside the second header (after the manifest's one block of data)
        #expect(Self.read(stream).error == .badChecksum(offset: 1024))

        let whole = Self.archive(Self.sample)
        guard case .truncated? = Self.read(Array(whole.prefix(1024 + 512 + 100))).error else {
            Issue.record("a cut inside a member")
            return
        }
        guard case .truncated? = Self.read(Array(whole.dropLast(1024))).error else {
            Issue.record("no end-of-archive blocks")
            return
        }
        guard case .truncated? = Self.read(Array(whole.prefix(300))).error else {
            Issue.record("a cut inside the first header")
            return
        }
        let read = Self.read(whole, limit: 100)
        #expect(read.error == .memberTooLarge(name: "a", size: 512, limit: 100))
        #expect(read.members.map(\.0) == ["imgd-manifest.jsonl"], "nothing of the large member was passed on")

        var notTar = [UInt8](repeating: 0x41, count: 512) + TarHeader.endOfArchive
        notTar[0] = 0x41
        guard case .malformedHeader? = Self.read(notTar).error else {
            Issue.record("a block of text is not a header")
            return
        }
    }

    private func run(_ executable: String, _ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: data, as: UTF8.self)
    }
}

extension TarReaderTests {
    @Test("a size of 8 GiB or more is written in base-256 and read back, and refused over the limit at its header")
    func largeSize() {
        let header = TarHeader.regularFile(name: "big", size: 1 << 40, modified: 0)
        #expect(header[124] == 0x80)
        let read = Self.read(header + [UInt8](repeating: 7, count: 4096), limit: 1 << 20)
        #expect(read.error == .memberTooLarge(name: "big", size: 1 << 40, limit: 1 << 20))
    }
}
