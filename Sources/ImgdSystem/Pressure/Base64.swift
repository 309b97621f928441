/// Decoding of standard base64 (RFC 4648, `+` and `/`), for `MEMORY_PRESSURE_WRITE`. Small
/// enough to write here rather than pull Foundation into the target for one call.
enum Base64 {
    /// The bytes `text` encodes; nil when it is not base64. Padding is optional and ASCII
    /// whitespace is ignored, as systemd's decoder does.
    static func decode(_ text: String) -> [UInt8]? {
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
