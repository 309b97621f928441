import ImgdProtocol

/// One event as a line for people (`imgctl watch`): `7 fetched bytes=812 format=jpeg url=http://…`.
///
/// The fields are sorted by name; a string is written bare unless it is empty or holds a
/// space, a quote, a `=` or a control character (C0, DEL, C1), when it is written as a JSON
/// string; numbers, booleans, arrays and objects are written as compact JSON. In JSON text DEL
/// and C1 controls, which JSON leaves raw, are escaped too (`\u009b`): nothing reaches the
/// terminal as a control character.
enum EventFormatter {
    static func line(_ event: ControlEvent) -> String {
        var parts = ["\(event.seq)", event.name]
        if case .object(let fields) = event.data {
            for key in fields.keys.sorted() {
                parts.append("\(key)=\(text(fields[key]!))")
            }
        } else if event.data != .null {
            parts.append("data=\(terminalSafe(event.data.jsonText))")
        }
        return parts.joined(separator: " ")
    }

    static func text(_ value: JSONValue) -> String {
        guard case .string(let string) = value else { return terminalSafe(value.jsonText) }
        let needsQuotes =
            string.isEmpty
            || string.unicodeScalars.contains { scalar in
                scalar == " " || scalar == "\"" || scalar == "=" || scalar == "\\" || isControl(scalar)
            }
        return needsQuotes ? terminalSafe(value.jsonText) : string
    }

    /// C0, DEL and C1.
    private static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value)
    }

    /// JSON text with DEL and C1 controls (left raw by JSON encoders) written as `\u00XX`: they
    /// can only be inside strings, where that is the same character to a JSON reader.
    private static func terminalSafe(_ json: String) -> String {
        guard json.unicodeScalars.contains(where: isControl) else { return json }
        var result = ""
        for scalar in json.unicodeScalars {
            if isControl(scalar) {
                result += "\\u00" + String(scalar.value, radix: 16).leftPadded(2)
            } else {
                result.unicodeScalars.append(scalar)
            }
        }
        return result
    }
}

extension String {
    fileprivate func leftPadded(_ width: Int) -> String {
        String(repeating: "0", count: Swift.max(0, width - count)) + self
    }
}
