/// Standard base64 (RFC 4648, `+` and `/`), the one codec of imgd and imgctl: the image bytes of
/// `get` with `data: true` (written by the daemon, read by imgctl) and systemd's
/// `MEMORY_PRESSURE_WRITE`. Small enough to write here rather than pull Foundation into every
/// target that needs it.
public enum Base64 {
    /// The alphabet, by 6-bit value.
    private static let alphabet: [UInt8] = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    /// Two characters for each 12-bit value, first in the low byte: one lookup per two output
    /// characters (as Chromium's encoder does), as fast as Foundation's encoder here.
    private static let pairs: [UInt16] = (0..<4096).map { UInt16(alphabet[$0 >> 6]) | UInt16(alphabet[$0 & 0x3F]) << 8 }

    /// The 6-bit value of each byte; 0xFF for bytes outside the alphabet.
    private static let values: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (value, byte) in alphabet.enumerated() { table[Int(byte)] = UInt8(value) }
        return table
    }()

    /// `bytes` as base64 with padding, on one line.
    public static func encode(_ bytes: some Collection<UInt8>) -> String {
        bytes.withContiguousStorageIfAvailable { encode(buffer: $0) } ?? Array(bytes).withUnsafeBufferPointer { encode(buffer: $0) }
    }

    private static func encode(buffer input: UnsafeBufferPointer<UInt8>) -> String {
        let length = (input.count + 2) / 3 * 4
        return pairs.withUnsafeBufferPointer { pairs in
            String(unsafeUninitializedCapacity: length) { output in
                let target = UnsafeMutableRawPointer(output.baseAddress!)
                var out = 0
                var index = 0
                while index + 3 <= input.count {
                    let group = Int(input[index]) << 16 | Int(input[index + 1]) << 8 | Int(input[index + 2])
                    let four = UInt32(pairs[group >> 12]) | UInt32(pairs[group & 0xFFF]) << 16
                    target.storeBytes(of: four.littleEndian, toByteOffset: out, as: UInt32.self)
                    index += 3
                    out += 4
                }
                let rest = input.count - index
                if rest > 0 {
                    let group = Int(input[index]) << 16 | (rest == 2 ? Int(input[index + 1]) << 8 : 0)
                    let two = pairs[group >> 12]
                    output[out] = UInt8(truncatingIfNeeded: two)
                    output[out + 1] = UInt8(truncatingIfNeeded: two >> 8)
                    output[out + 2] = rest == 2 ? alphabet[group >> 6 & 0x3F] : UInt8(ascii: "=")
                    output[out + 3] = UInt8(ascii: "=")
                    out += 4
                }
                return out
            }
        }
    }

    /// The bytes `text` encodes; nil when it is not base64. Padding is optional and ASCII
    /// whitespace is ignored, as systemd's decoder does.
    public static func decode(_ text: String) -> [UInt8]? {
        // The common case, a reply's `data`: whole groups of four with no whitespace. All but the
        // last group go through the table; the last (where padding may be) and any text with
        // something else in it go through the careful decoder, which gives the same answer.
        let fast = text.utf8.withContiguousStorageIfAvailable { utf8 -> [UInt8]? in
            guard utf8.count >= 8, utf8.count % 4 == 0 else { return nil }
            let groups = utf8.count / 4 - 1
            var valid = true
            var bytes = values.withUnsafeBufferPointer { values in
                [UInt8](unsafeUninitializedCapacity: groups * 3 + 3) { output, count in
                    var out = 0
                    var index = 0
                    while index < groups * 4 {
                        let a = values[Int(utf8[index])], b = values[Int(utf8[index + 1])]
                        let c = values[Int(utf8[index + 2])], d = values[Int(utf8[index + 3])]
                        guard (a | b | c | d) & 0xC0 == 0 else {
                            valid = false
                            break
                        }
                        let group = UInt32(a) << 18 | UInt32(b) << 12 | UInt32(c) << 6 | UInt32(d)
                        output[out] = UInt8(truncatingIfNeeded: group >> 16)
                        output[out + 1] = UInt8(truncatingIfNeeded: group >> 8)
                        output[out + 2] = UInt8(truncatingIfNeeded: group)
                        out += 3
                        index += 4
                    }
                    count = out
                }
            }
            guard valid, let last = carefulDecode(UnsafeBufferPointer(rebasing: utf8[(groups * 4)...])) else { return nil }
            bytes.append(contentsOf: last)
            return bytes
        }
        if let fast, let fast { return fast }
        return carefulDecode(text.utf8)
    }

    /// Decodes byte by byte, with systemd's leniency (see ``decode(_:)``).
    private static func carefulDecode(_ utf8: some Sequence<UInt8>) -> [UInt8]? {
        var output: [UInt8] = []
        output.reserveCapacity(utf8.underestimatedCount * 3 / 4)
        var accumulator: UInt32 = 0
        var bits = 0
        var padding = 0
        for byte in utf8 {
            let value: UInt8
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): value = byte - UInt8(ascii: "A")
            case UInt8(ascii: "a")...UInt8(ascii: "z"): value = byte - UInt8(ascii: "a") + 26
            case UInt8(ascii: "0")...UInt8(ascii: "9"): value = byte - UInt8(ascii: "0") + 52
            case UInt8(ascii: "+"): value = 62
            case UInt8(ascii: "/"): value = 63
            case UInt8(ascii: "="):
                padding += 1
                continue
            case UInt8(ascii: " "), UInt8(ascii: "\n"), UInt8(ascii: "\r"), UInt8(ascii: "\t"):
                continue
            default:
                return nil
            }
            guard padding == 0 else { return nil }  // data after padding
            accumulator = accumulator << 6 | UInt32(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                output.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
            }
        }
        // 6 leftover bits cannot encode a byte; leftover bits must be zero; at most "==".
        guard bits < 6, accumulator & ((1 << UInt32(bits)) - 1) == 0, padding <= 2 else { return nil }
        return output
    }
}
