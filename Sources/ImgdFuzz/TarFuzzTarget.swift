import ImgdCore

/// Reads the input as a warm set's tar stream (`imgctl import`) twice: in one piece, and cut at
/// random places (as a socket delivers it), under a random member limit, and requires both reads
/// to report the same members, bytes and error. The reader keeps at most a header block and an
/// extended header between pieces, so a cut anywhere (inside a header, a number, a pax record)
/// must change nothing.
enum TarFuzzTarget {
    static func run(_ input: inout FuzzInput) throws(FuzzFinding) {
        var pieces: [Int] = []
        for _ in 0..<Int(input.byte() % 8 + 1) {
            pieces.append(input.pick([1, 2, 3, 7, 100, 511, 512, 513, 1024, 4096, 65536]))
        }
        let limit = input.pick([0, 1, 100, 512, 4096, 1 << 20, Int.max])
        let payload = input.payload
        let whole = read(payload, limit: limit, pieces: nil)
        let cut = read(payload, limit: limit, pieces: pieces)
        guard whole == cut else {
            throw FuzzFinding(target: "tar", "reading in pieces of \(pieces) gave another result than one read (limit \(limit)):\nwhole: \(whole)\ncut:   \(cut)")
        }
    }

    /// What a read gave, written out so two reads can be compared.
    struct Outcome: Equatable, CustomStringConvertible {
        var events: [String] = []
        var error: String?

        var description: String { "\(events.count) events, error \(error ?? "none"): \(events.prefix(20).joined(separator: "; "))" }
    }

    static func read(_ bytes: [UInt8], limit: Int, pieces: [Int]?) -> Outcome {
        var reader = TarReader(maxMemberBytes: limit)
        var outcome = Outcome()
        // Data events are merged per member (their cut depends on the pieces, their bytes must not).
        var data: [UInt8] = []
        func sink(_ event: TarEvent) {
            switch event {
            case .member(let name, let size, let isRegularFile): outcome.events.append("member \(name.debugDescription) \(size) \(isRegularFile)")
            case .data(let piece): data += piece
            case .memberEnd:
                outcome.events.append("data \(data.count) \(SHA256Digest(of: data).hex.prefix(16))")
                data = []
            }
        }
        var offset = 0
        var index = 0
        do {
            while offset < bytes.count {
                let size = pieces.map { $0[index % $0.count] } ?? bytes.count
                index += 1
                let end = min(bytes.count, offset + size)
                try bytes[offset..<end].withUnsafeBytes { try reader.feed($0, sink) }
                offset = end
            }
            try reader.finish()
        } catch {
            outcome.error = "\(error)"
        }
        if !data.isEmpty { outcome.events.append("partial \(data.count) \(SHA256Digest(of: data).hex.prefix(16))") }
        return outcome
    }
}
