/// Deterministic image bytes for tests: real, decodable PNG and GIF files, and a JPEG marker
/// stream with a valid structure (SOI, APP0, DQT, SOF0, DHT, SOS, scan data, EOI).
///
/// The PNG encoder stores pixels in uncompressed deflate blocks, so a file's size is predictable
/// (`width * height * 3` plus a few hundred bytes, plus any `padding`).
public enum TestImages {
    /// A decodable RGB PNG. `padding` adds an ancillary chunk of that many bytes before IEND
    /// (readers skip it), to reach a wanted file size without changing the dimensions.
    public static func png(width: Int, height: Int, seed: UInt32 = 1, padding: Int = 0) -> [UInt8] {
        var out: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
        var ihdr: [UInt8] = []
        ihdr.appendBigEndian(UInt32(width))
        ihdr.appendBigEndian(UInt32(height))
        ihdr += [8, 2, 0, 0, 0]  // 8-bit, truecolour, deflate, no filter method, no interlace
        out.appendPNGChunk("IHDR", ihdr)
        var raw: [UInt8] = []
        raw.reserveCapacity(height * (1 + width * 3))
        var state = seed | 1
        for _ in 0..<height {
            raw.append(0)  // filter type none
            for _ in 0..<(width * 3) {
                state ^= state << 13; state ^= state >> 17; state ^= state << 5
                raw.append(UInt8(truncatingIfNeeded: state))
            }
        }
        out.appendPNGChunk("IDAT", zlibStored(raw))
        if padding > 0 {
            out.appendPNGChunk("pADd", [UInt8](repeating: 0x20, count: padding))
        }
        out.appendPNGChunk("IEND", [])
        return out
    }

    /// A PNG whose size is close to `bytes` (never below ~100 bytes), of the given dimensions.
    public static func png(bytes: Int, width: Int = 8, height: Int = 8, seed: UInt32 = 1) -> [UInt8] {
        let base = png(width: width, height: height, seed: seed)
        let chunkOverhead = 12
        return bytes > base.count + chunkOverhead
            ? png(width: width, height: height, seed: seed, padding: bytes - base.count - chunkOverhead)
            : base
    }

    /// A PNG that only declares its dimensions (IHDR then IEND, no pixel data): for pixel-limit tests.
    public static func pngHeaderOnly(width: Int, height: Int) -> [UInt8] {
        var out: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
        var ihdr: [UInt8] = []
        ihdr.appendBigEndian(UInt32(width))
        ihdr.appendBigEndian(UInt32(height))
        ihdr += [8, 2, 0, 0, 0]
        out.appendPNGChunk("IHDR", ihdr)
        out.appendPNGChunk("IDAT", zlibStored([0]))
        out.appendPNGChunk("IEND", [])
        return out
    }

    /// A PNG with one bit flipped in its image data after the CRCs were computed: complete,
    /// but damaged (its IDAT chunk fails its CRC-32), as a bad disk or a faulty proxy leaves it.
    public static func pngWithFlippedBit(width: Int, height: Int) -> [UInt8] {
        var out = png(width: width, height: height)
        // Signature (8) and IHDR (25), then IDAT's length and type (8): its first data byte.
        out[8 + 25 + 8 + 4] ^= 0x04
        return out
    }

    /// A decodable single-frame GIF89a, all pixels colour 0 of a two-colour palette.
    public static func gif(width: Int, height: Int) -> [UInt8] {
        var out = Array("GIF89a".utf8)
        out.appendLittleEndian(UInt16(width))
        out.appendLittleEndian(UInt16(height))
        out += [0x80, 0x00, 0x00]  // global colour table of 2 entries
        out += [0x00, 0x00, 0x00, 0xFF, 0xFF, 0xFF]
        out += [0x2C, 0, 0, 0, 0]  // image descriptor at 0,0
        out.appendLittleEndian(UInt16(width))
        out.appendLittleEndian(UInt16(height))
        out.append(0x00)
        // LZW, minimum code size 2: clear, one pixel of colour 0, end-of-information. Decoders
        // fill the rest of the frame with the background colour.
        out += [0x02, 0x02, 0x44, 0x01, 0x00]
        out.append(0x3B)  // trailer
        return out
    }

    /// A baseline JPEG marker stream with the given dimensions and about `scanBytes` of entropy data.
    public static func jpeg(width: Int, height: Int, scanBytes: Int = 64) -> [UInt8] {
        var out: [UInt8] = [0xFF, 0xD8]
        // APP0 JFIF
        out += [0xFF, 0xE0, 0x00, 0x10] + Array("JFIF".utf8) + [0x00, 0x01, 0x01, 0x00, 0x00, 0x01, 0x00, 0x01, 0x00, 0x00]
        // DQT: one 8-bit table of 64 ones
        out += [0xFF, 0xDB, 0x00, 0x43, 0x00] + [UInt8](repeating: 1, count: 64)
        // SOF0: precision 8, height, width, 1 component
        out += [0xFF, 0xC0, 0x00, 0x0B, 0x08]
        out.appendBigEndian(UInt16(height))
        out.appendBigEndian(UInt16(width))
        out += [0x01, 0x01, 0x11, 0x00]
        // DHT: a trivial DC table with one code
        out += [0xFF, 0xC4, 0x00, 0x14, 0x00, 0x01] + [UInt8](repeating: 0, count: 15) + [0x00]
        // SOS
        out += [0xFF, 0xDA, 0x00, 0x08, 0x01, 0x01, 0x00, 0x00, 0x3F, 0x00]
        for index in 0..<scanBytes { out.append(UInt8(truncatingIfNeeded: index * 7) & 0x7F) }
        out += [0xFF, 0xD9]
        return out
    }

    /// A small HTML error page, the classic "200 but not an image" body.
    public static let htmlPage: [UInt8] = Array(
        "<!DOCTYPE html><html><head><title>Oops</title></head><body>Not found</body></html>\n".utf8)

    // MARK: - Encoding helpers

    static func zlibStored(_ data: [UInt8]) -> [UInt8] {
        var out: [UInt8] = [0x78, 0x01]
        var offset = 0
        repeat {
            let count = min(65535, data.count - offset)
            let isLast = offset + count == data.count
            out.append(isLast ? 1 : 0)
            out.appendLittleEndian(UInt16(count))
            out.appendLittleEndian(~UInt16(count))
            out += data[offset..<(offset + count)]
            offset += count
        } while offset < data.count
        var a: UInt32 = 1, b: UInt32 = 0
        for byte in data { a = (a + UInt32(byte)) % 65521; b = (b + a) % 65521 }
        out.appendBigEndian((b << 16) | a)
        return out
    }

    static let crcTable: [UInt32] = (0..<256).map { n -> UInt32 in
        var c = UInt32(n)
        for _ in 0..<8 { c = (c & 1) != 0 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
        return c
    }

    /// Over raw buffers with the table fetched once: bodies of megabytes are made on the test
    /// server's event loop, and a generic loop that reaches the lazy global on every byte takes
    /// seconds there in a debug build, minutes under ThreadSanitizer.
    static func crc32(_ bytes: [UInt8]) -> UInt32 {
        crcTable.withUnsafeBufferPointer { table in
            bytes.withUnsafeBufferPointer { data in
                var c: UInt32 = 0xFFFF_FFFF
                for byte in data { c = table[Int((c ^ UInt32(byte)) & 0xFF)] ^ (c >> 8) }
                return c ^ 0xFFFF_FFFF
            }
        }
    }
}

extension Array where Element == UInt8 {
    mutating func appendBigEndian<T: FixedWidthInteger>(_ value: T) {
        Swift.withUnsafeBytes(of: value.bigEndian) { append(contentsOf: $0) }
    }

    mutating func appendLittleEndian<T: FixedWidthInteger>(_ value: T) {
        Swift.withUnsafeBytes(of: value.littleEndian) { append(contentsOf: $0) }
    }

    mutating func appendPNGChunk(_ type: String, _ data: [UInt8]) {
        appendBigEndian(UInt32(data.count))
        let typeAndData = Array(type.utf8) + data
        append(contentsOf: typeAndData)
        appendBigEndian(TestImages.crc32(typeAndData))
    }
}
