/// Standard base64 (RFC 4648, `+` and `/`), the one codec of imgd and imgctl: the image bytes of
/// `get` with `data: true` (written by the daemon, read by imgctl) and systemd's
/// `MEMORY_PRESSURE_WRITE`. Small enough to write here rather than pull Foundation into every
/// target that needs it.
public enum Base64 {
    /// The alphabet, by 6-bit value.
    private static let alphabet: [UInt8] = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    /// `bytes` as base64 with padding, on one line.
    public static func encode(_ bytes: some Collection<UInt8>) -> String {
        bytes.withContiguousStorageIfAvailable { encode(buffer: $0) } ?? Array(bytes).withUnsafeBufferPointer { encode(buffer: $0) }
    }

    private static func encode(buffer input: UnsafeBufferPointer<UInt8>) -> String {
        let length = (input.count + 2) / 3 * 4
        return alphabet.withUnsafeBufferPointer { table in
            String(unsafeUninitializedCapacity: length) { output in
                var out = 0
                var index = 0
                while index + 3 <= input.count {
                    let group = UInt32(input[index]) << 16 | UInt32(input[index + 1]) << 8 | UInt32(input[index + 2])
                    output[out] = table[Int(group >> 18)]
                    output[out + 1] = table[Int(group >> 12 & 0x3F)]
                    output[out + 2] = table[Int(group >> 6 & 0x3F)]
                    output[out + 3] = table[Int(group & 0x3F)]
                    index += 3
                    out += 4
                }
                let rest = input.count - index
                if rest > 0 {
                    let group = UInt32(input[index]) << 16 | (rest == 2 ? UInt32(input[index + 1]) << 8 : 0)
                    output[out] = table[Int(group >> 18)]
                    output[out + 1] = table[Int(group >> 12 & 0x3F)]
                    output[out + 2] = rest == 2 ? table[Int(group >> 6 & 0x3F)] : UInt8(ascii: "=")
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
        var output: [UInt8] = []
        output.reserveCapacity(text.utf8.count * 3 / 4)
        var accumulator: UInt32 = 0
        var bits = 0
        var padding = 0
        for byte in text.utf8 {
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
