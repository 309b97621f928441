/// One PNG chunk as the chunk walk saw it, once its CRC-32 matched: its type, its length, and
/// the first bytes of its data, which is all the rules about ancillary and APNG chunks read.
struct PNGChunk {
    /// How much of a chunk's data is kept: a text keyword (1 to 79 bytes), its NUL and the two
    /// bytes after it, and every fixed-size chunk (fcTL, the largest, is 26 bytes).
    static let headLimit = 96

    var type: UInt32
    /// The declared data length.
    var length: Int
    /// The body offset of the chunk's length field, for messages.
    var offset: Int
    /// The first `min(length, headLimit)` data bytes, for the types `PNGChunkRules` inspects.
    var head: [UInt8] = []
    /// NUL bytes in the data past `headLimit` (counted for iTXt, whose language tag and
    /// translated keyword may be long).
    var laterNULs = 0

    /// The chunk's type as text, or its bytes in hex when they are not printable.
    var name: String { Self.name(type) }

    /// The big-endian unsigned 32-bit value at `index` of the data head.
    func uint32(at index: Int) -> Int {
        Int(ImageByteOrder.bigEndian.decode(head[index..<index + 4]))
    }

    static let header = type("IHDR")
    static let palette = type("PLTE")
    static let imageData = type("IDAT")
    static let end = type("IEND")
    static let animationControl = type("acTL")
    static let frameControl = type("fcTL")
    static let frameData = type("fdAT")
    static let internationalText = type("iTXt")

    static func type(_ name: StaticString) -> UInt32 {
        name.withUTF8Buffer { UInt32(ImageByteOrder.bigEndian.decode($0)) }
    }

    static func name(_ type: UInt32) -> String {
        withUnsafeBytes(of: type.bigEndian) { bytes in
            bytes.allSatisfy { (0x21...0x7E).contains($0) }
                ? String(decoding: bytes, as: UTF8.self)
                : bytes.map(ImageSignature.hex).joined(separator: " ")
        }
    }
}
