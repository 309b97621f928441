import ImgdCore

/// Runs the input through what the downloader does with a body: sniffing prefixes as they
/// arrive, then validating the complete body from memory (a small body) and from a file (a body
/// spilled to disk) whose declared length may or may not match what is there. Requires:
/// - a verdict sniffed from a prefix (image of a format, or not an image) is the verdict for the
///   whole body, since a download is stopped or kept on it;
/// - the memory and file sources give the same result for the same bytes, and so does a file
///   whose PNG chunk walk was made as its bytes arrived, in pieces of any size (a spilled body);
/// - a body that validates sniffs as the same format and keeps within the pixel limit;
/// - a file declared shorter than it is validates as exactly its declared prefix.
enum ImageFuzzTarget {
    static func run(_ input: inout FuzzInput) throws(FuzzFinding) {
        let lengthChoice = input.byte()
        let lengthDelta = input.uint16()
        let pieceSize = 1 + input.uint16()
        let maxPixels = input.pick([100_000_000, 1, 64, 4096, 1 << 20])
        let body = input.payload
        let validator = ImageValidator(maxPixels: maxPixels)

        let verdict = ImageValidator.sniff(body, isComplete: true)
        for length in [1, 2, 3, 4, 8, 12, 16, 24, 32, 64, 128, 256, 512, 1024, 1025] where length < body.count {
            let early = ImageValidator.sniff(Array(body.prefix(length)), isComplete: false)
            if early != .needMoreBytes, early != verdict {
                throw FuzzFinding(
                    target: "image", "the first \(length) bytes sniff as \(early), the whole \(body.count) bytes as \(verdict)")
            }
        }

        let fromMemory = outcome { try validator.validate(MemoryByteSource(body)) }
        let file = ScratchFile(holding: body)
        let fd = file.fileDescriptor
        // The descriptor is used below without the object: keep the file open until the end.
        defer { withExtendedLifetime(file) {} }
        let fromFile = outcome { try validator.validate(FileByteSource(fileDescriptor: fd, count: body.count)) }
        guard fromMemory == fromFile else {
            throw FuzzFinding(target: "image", "memory and file sources disagree: \(fromMemory) / \(fromFile)")
        }
        let walked = outcome {
            try validator.validate(FileByteSource(fileDescriptor: fd, count: body.count), walked: body.withUnsafeBytes { PNGArrivalWalk.walking($0, pieceSize: pieceSize) })
        }
        guard walked == fromFile else {
            throw FuzzFinding(
                target: "image", "a PNG walked on arrival in pieces of \(pieceSize) bytes gave \(walked), read back \(fromFile)")
        }
        if case .success(let info) = fromMemory {
            guard verdict == .image(info.format) else {
                throw FuzzFinding(target: "image", "validated as \(info.format) but sniffed as \(verdict)")
            }
            if let width = info.width, let height = info.height {
                let (pixels, overflow) = width.multipliedReportingOverflow(by: height)
                guard !overflow, pixels <= maxPixels else {
                    throw FuzzFinding(target: "image", "\(width)×\(height) passed a limit of \(maxPixels) pixels")
                }
            }
        }

        // The declared length: the same (most inputs), shorter, or longer than the body.
        let declared: Int
        switch lengthChoice {
        case 0..<128: return
        case 128..<192: declared = max(0, body.count - 1 - lengthDelta % max(1, body.count))
        default: declared = body.count + 1 + lengthDelta
        }
        let fromDeclared = outcome { try validator.validate(FileByteSource(fileDescriptor: fd, count: declared)) }
        if declared < body.count {
            let prefix = outcome { try validator.validate(MemoryByteSource(Array(body.prefix(declared)))) }
            guard prefix == fromDeclared else {
                throw FuzzFinding(
                    target: "image", "a file declared \(declared) of \(body.count) bytes gave \(fromDeclared), its prefix \(prefix)")
            }
        } else if case .success(let info) = fromDeclared {
            throw FuzzFinding(
                target: "image", "a file declared \(declared) bytes but holding \(body.count) validated as \(info)")
        }
    }

    /// A validation's result in a comparable form.
    enum Outcome: Equatable, CustomStringConvertible {
        case success(ImageInfo)
        case failure(String)

        var description: String {
            switch self {
            case .success(let info): "valid \(info)"
            case .failure(let reason): "refused: \(reason)"
            }
        }
    }

    private static func outcome(_ validate: () throws -> ImageInfo) -> Outcome {
        do {
            return .success(try validate())
        } catch {
            return .failure(String(describing: error))
        }
    }
}
