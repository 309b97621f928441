/// One event as a line for people (`imgctl watch`): `7 fetched bytes=812 format=jpeg url=http://…`.
///
/// The fields are sorted by name; a string is written bare unless it is empty or holds a
/// space, a quote, a `=` or a control character, when it is written as a JSON string;
/// numbers, booleans, arrays and objects are written as compact JSON.
enum EventFormatter {
    static func line(_ event: ControlEvent) -> String {
        var parts = ["\(event.seq)", event.name]
        if case .object(let fields) = event.data {
            for key in fields.keys.sorted() {
                parts.append("\(key)=\(text(fields[key]!))")
            }
        } else if event.data != .null {
            parts.append("data=\(event.data.compactText)")
        }
        return parts.joined(separator: " ")
    }

    static func text(_ value: JSONValue) -> String {
        guard case .string(let string) = value else { return value.compactText }
        let needsQuotes =
            string.isEmpty
            || string.unicodeScalars.contains { scalar in
                scalar == " " || scalar == "\"" || scalar == "=" || scalar == "\\" || scalar.value < 0x20
                    || scalar.value == 0x7F
            }
        return needsQuotes ? value.compactText : string
    }
}
