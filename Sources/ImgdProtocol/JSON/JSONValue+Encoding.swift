import NIOCore

#if canImport(Glibc)
import Glibc
#endif

extension JSONValue {
    /// The value as compact JSON: no spaces, object keys sorted by their UTF-8 bytes, `/` not
    /// escaped, non-ASCII characters written as UTF-8; only `"`, `\` and control characters are
    /// escaped. The same value always gives the same text.
    public var jsonText: String {
        var buffer = ByteBuffer()
        buffer.writeJSONValue(self)
        return String(buffer: buffer)
    }
}

extension ByteBuffer {
    /// Appends `value` as compact JSON (see ``JSONValue/jsonText``); returns the bytes written.
    @discardableResult
    public mutating func writeJSONValue(_ value: JSONValue) -> Int {
        let start = writerIndex
        switch value {
        case .null:
            writeStaticString("null")
        case .bool(let flag):
            writeStaticString(flag ? "true" : "false")
        case .int(let number):
            writeDecimal(number)
        case .double(let number):
            // Swift's description is the shortest text that reads back as the same Double, and
            // is valid JSON for every finite value ("1.5", "1e-07", "-0.0"). JSON has no NaN.
            writeString(number.isFinite ? number.description : "null")
        case .string(let text):
            writeJSONString(text)
        case .array(let elements):
            writeInteger(UInt8(ascii: "["))
            for (index, element) in elements.enumerated() {
                if index > 0 { writeInteger(UInt8(ascii: ",")) }
                writeJSONValue(element)
            }
            writeInteger(UInt8(ascii: "]"))
        case .object(let members):
            writeInteger(UInt8(ascii: "{"))
            // Sorted as pairs, so no member is looked up (hashed) again to be written.
            let sorted = members.sorted { Self.utf8Precedes($0.key, $1.key) }
            for (index, member) in sorted.enumerated() {
                if index > 0 { writeInteger(UInt8(ascii: ",")) }
                writeJSONString(member.key)
                writeInteger(UInt8(ascii: ":"))
                writeJSONValue(member.value)
            }
            writeInteger(UInt8(ascii: "}"))
        }
        return writerIndex - start
    }

    /// Appends `number` in decimal, without making a `String` of it first.
    mutating func writeDecimal(_ number: Int64) {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { digits in
            // The magnitude as UInt64: |Int64.min| does not fit in Int64.
            var rest = number.magnitude
            var start = 20
            repeat {
                start -= 1
                digits[start] = UInt8(ascii: "0") + UInt8(rest % 10)
                rest /= 10
            } while rest > 0
            if number < 0 { writeInteger(UInt8(ascii: "-")) }
            writeBytes(UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: digits[start...])))
        }
    }

    /// Appends `text` as a JSON string literal.
    public mutating func writeJSONString(_ text: String) {
        writeInteger(UInt8(ascii: "\""))
        // Most strings (paths, URLs, hex digests) need no escape: one scan, one copy.
        let plain = text.utf8.withContiguousStorageIfAvailable { utf8 -> Bool in
            for byte in utf8 where Self.needsEscape(byte) { return false }
            writeBytes(UnsafeRawBufferPointer(utf8))
            return true
        }
        if plain == true {
            // Written above.
        } else if plain == nil && !text.utf8.contains(where: Self.needsEscape) {
            writeString(text)
        } else {
            for byte in text.utf8 {
                guard Self.needsEscape(byte) else {
                    writeInteger(byte)
                    continue
                }
                switch byte {
                case UInt8(ascii: "\""): writeStaticString("\\\"")
                case UInt8(ascii: "\\"): writeStaticString("\\\\")
                case 0x0A: writeStaticString("\\n")
                case 0x0D: writeStaticString("\\r")
                case 0x09: writeStaticString("\\t")
                case 0x08: writeStaticString("\\b")
                case 0x0C: writeStaticString("\\f")
                default:
                    let hex: [UInt8] = Array("0123456789abcdef".utf8)
                    writeStaticString("\\u00")
                    writeInteger(hex[Int(byte >> 4)])
                    writeInteger(hex[Int(byte & 0x0F)])
                }
            }
        }
        writeInteger(UInt8(ascii: "\""))
    }

    /// Whether `lhs` sorts before `rhs` by their UTF-8 bytes (not by `String`'s `<`, which
    /// compares canonical equivalents as equal): a `memcmp` over native strings, which keys are.
    static func utf8Precedes(_ lhs: String, _ rhs: String) -> Bool {
        var lhs = lhs
        var rhs = rhs
        return lhs.withUTF8 { left in
            rhs.withUTF8 { right in
                let common = min(left.count, right.count)
                let order = common == 0 ? 0 : memcmp(left.baseAddress!, right.baseAddress!, common)
                return order != 0 ? order < 0 : left.count < right.count
            }
        }
    }

    @inline(__always)
    private static func needsEscape(_ byte: UInt8) -> Bool {
        byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\")
    }
}
