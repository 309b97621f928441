/// Values written without quotes: booleans, integers (decimal, `0x`, `0o`, `0b`), floats
/// (`inf` and `nan` included) and the four date-time kinds.
extension TOMLParser {
    /// The bytes a bare value is made of, up to a space, comma, bracket, brace, `#` or line end.
    /// A date followed by a space and a time (`1979-05-27 07:32:00`) is one value.
    mutating func readScalar() throws(TOMLError) -> TOMLValue {
        let start = position
        readWord()
        if position - start == 10, current == 0x20, Self.isDigit(peek(1)), Self.isDigit(peek(2)),
            peek(3) == UInt8(ascii: ":"), text[start + 4] == UInt8(ascii: "-")
        {
            position += 1
            readWord()
        }
        let word = text[start..<position]
        let shown = String(decoding: word, as: UTF8.self)
        guard !word.isEmpty else { throw fail("expected a value") }
        switch shown {
        case "true": return .boolean(true)
        case "false": return .boolean(false)
        case "inf", "+inf": return .float(.infinity)
        case "-inf": return .float(-.infinity)
        case "nan", "+nan", "-nan": return .float(shown.hasPrefix("-") ? -.nan : .nan)
        default: break
        }
        if word.contains(UInt8(ascii: ":")) || (word.count >= 10 && word[start + 4] == UInt8(ascii: "-") && Self.isDigit(word.first)) {
            guard let value = Self.dateTime(word) else {
                throw fail(
                    "\(shown) is not a valid date or time (1979-05-27, 07:32:00, 1979-05-27T07:32:00Z)", at: start,
                    withoutText: "not a valid date or time (1979-05-27, 07:32:00, 1979-05-27T07:32:00Z)")
            }
            return value
        }
        return try number(word, shown: shown, at: start)
    }

    private mutating func readWord() {
        while let byte = current, Self.isWordByte(byte) { position += 1 }
    }

    private static func isWordByte(_ byte: UInt8) -> Bool {
        isBareKeyByte(byte) || byte == UInt8(ascii: "+") || byte == UInt8(ascii: ".") || byte == UInt8(ascii: ":")
    }

    static func isDigit(_ byte: UInt8?) -> Bool {
        guard let byte else { return false }
        return byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")
    }

    // MARK: - Numbers

    private func number(_ word: ArraySlice<UInt8>, shown: String, at start: Int) throws(TOMLError) -> TOMLValue {
        func refuse(_ why: String) -> TOMLError {
            fail("\(shown) is not a number: \(why)", at: start, withoutText: "not a number: \(why)")
        }
        guard Self.isDigit(word.first) || word.first == UInt8(ascii: "+") || word.first == UInt8(ascii: "-") else {
            if word.first == UInt8(ascii: ".") { throw refuse("a float needs a digit before its point (0.5)") }
            throw fail(
                "\(shown) is not a value (a string needs quotes: \"\(shown)\")", at: start,
                withoutText: "not a value (a string needs quotes)")
        }
        let signed = word.first == UInt8(ascii: "+") || word.first == UInt8(ascii: "-")
        let negative = word.first == UInt8(ascii: "-")
        let body = signed ? word.dropFirst() : word

        // 0x, 0o, 0b: no sign, digits of the base with single underscores between them.
        if body.count >= 2, body.first == UInt8(ascii: "0"), let radix = Self.radix(body[body.startIndex + 1]) {
            guard !signed else { throw refuse("a hexadecimal, octal or binary integer takes no sign") }
            guard let digits = Self.digits(body.dropFirst(2), radix: radix) else {
                throw refuse("digits of base \(radix), with single underscores between digits")
            }
            guard let value = Int(digits, radix: radix) else { throw refuse("beyond 64 bits") }
            return .integer(value)
        }

        // Decimal: an integer part, then a fraction and/or an exponent for a float.
        let exponentMark = body.firstIndex { $0 == UInt8(ascii: "e") || $0 == UInt8(ascii: "E") }
        let mantissa = body[..<(exponentMark ?? body.endIndex)]
        let point = mantissa.firstIndex(of: UInt8(ascii: "."))
        let integerPart = mantissa[..<(point ?? mantissa.endIndex)]
        guard let integerDigits = Self.digits(integerPart, radix: 10) else {
            if integerPart.isEmpty, point != nil { throw refuse("a float needs a digit before its point (0.5)") }
            throw refuse("decimal digits, with single underscores between digits")
        }
        guard integerDigits.count == 1 || !integerDigits.hasPrefix("0") else {
            throw refuse("leading zeros are not allowed")
        }
        var literal = (negative ? "-" : "") + integerDigits
        if let point {
            guard let fraction = Self.digits(mantissa[(point + 1)...], radix: 10) else {
                throw refuse("a float needs digits after its point (1.0), with single underscores between them")
            }
            literal += "." + fraction
        }
        if let exponentMark {
            var exponent = body[(exponentMark + 1)...]
            var sign = ""
            if let first = exponent.first, first == UInt8(ascii: "+") || first == UInt8(ascii: "-") {
                sign = first == UInt8(ascii: "-") ? "-" : ""
                exponent = exponent.dropFirst()
            }
            guard let digits = Self.digits(exponent, radix: 10) else {
                throw refuse("an exponent needs digits (1e6, 1e-3), with single underscores between them")
            }
            literal += "e" + sign + digits
        }
        guard point != nil || exponentMark != nil else {
            guard let value = Int(literal) else { throw refuse("beyond 64 bits") }
            return .integer(value)
        }
        guard let value = Double(literal), value.isFinite else { throw refuse("beyond the range of a 64-bit float") }
        return .float(value)
    }

    private static func radix(_ byte: UInt8) -> Int? {
        switch byte {
        case UInt8(ascii: "x"): 16
        case UInt8(ascii: "o"): 8
        case UInt8(ascii: "b"): 2
        default: nil
        }
    }

    /// The digits of `text` without its underscores; nil unless it is digits of `radix` with
    /// each underscore between two digits.
    private static func digits(_ text: ArraySlice<UInt8>, radix: Int) -> String? {
        var digits: [UInt8] = []
        var previousWasDigit = false
        for byte in text {
            if byte == UInt8(ascii: "_") {
                guard previousWasDigit else { return nil }
                previousWasDigit = false
                continue
            }
            guard let value = hexValue(byte), value < radix else { return nil }
            digits.append(byte)
            previousWasDigit = true
        }
        guard previousWasDigit else { return nil }
        return String(decoding: digits, as: UTF8.self)
    }

    private static func hexValue(_ byte: UInt8) -> Int? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): Int(byte - UInt8(ascii: "0"))
        case UInt8(ascii: "a")...UInt8(ascii: "f"): Int(byte - UInt8(ascii: "a")) + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): Int(byte - UInt8(ascii: "A")) + 10
        default: nil
        }
    }

    // MARK: - Dates and times

    /// `1979-05-27`, `07:32:00[.999]`, `1979-05-27T07:32:00[.999]` (T, t or a space), the last
    /// with `Z`, `z` or `±HH:MM` for an offset date-time; nil unless well-formed and in range.
    private static func dateTime(_ word: ArraySlice<UInt8>) -> TOMLValue? {
        var reader = FixedReader(bytes: word)
        if word.count >= 3, word[word.startIndex + 2] == UInt8(ascii: ":") {
            guard let time = reader.time(), reader.atEnd else { return nil }
            return .time(time)
        }
        guard let year = reader.number(4), reader.take(UInt8(ascii: "-")),
            let month = reader.number(2), reader.take(UInt8(ascii: "-")),
            let day = reader.number(2),
            (1...12).contains(month), (1...TOMLDate.days(inMonth: month, of: year)).contains(day)
        else { return nil }
        let date = TOMLDate(year: year, month: month, day: day)
        if reader.atEnd { return .date(date) }
        guard reader.take(UInt8(ascii: "T")) || reader.take(UInt8(ascii: "t")) || reader.take(0x20),
            let time = reader.time()
        else { return nil }
        if reader.atEnd { return .dateTime(date, time, offsetMinutes: nil) }
        if reader.take(UInt8(ascii: "Z")) || reader.take(UInt8(ascii: "z")) {
            return reader.atEnd ? .dateTime(date, time, offsetMinutes: 0) : nil
        }
        let negative = reader.take(UInt8(ascii: "-"))
        guard negative || reader.take(UInt8(ascii: "+")),
            let hours = reader.number(2), reader.take(UInt8(ascii: ":")), let minutes = reader.number(2),
            hours <= 23, minutes <= 59, reader.atEnd
        else { return nil }
        return .dateTime(date, time, offsetMinutes: (negative ? -1 : 1) * (hours * 60 + minutes))
    }
}

/// Reads fixed-width fields of a date or time.
private struct FixedReader {
    let bytes: ArraySlice<UInt8>
    var index: Int

    init(bytes: ArraySlice<UInt8>) {
        self.bytes = bytes
        index = bytes.startIndex
    }

    var atEnd: Bool { index == bytes.endIndex }

    mutating func take(_ byte: UInt8) -> Bool {
        guard index < bytes.endIndex, bytes[index] == byte else { return false }
        index += 1
        return true
    }

    /// Exactly `count` decimal digits.
    mutating func number(_ count: Int) -> Int? {
        guard bytes.endIndex - index >= count else { return nil }
        var value = 0
        for byte in bytes[index..<(index + count)] {
            guard TOMLParser.isDigit(byte) else { return nil }
            value = value * 10 + Int(byte - UInt8(ascii: "0"))
        }
        index += count
        return value
    }

    /// `HH:MM:SS` and an optional fraction (kept to the nanosecond; further digits dropped).
    mutating func time() -> TOMLTime? {
        guard let hour = number(2), take(UInt8(ascii: ":")), let minute = number(2), take(UInt8(ascii: ":")),
            let second = number(2), hour <= 23, minute <= 59, second <= 60
        else { return nil }
        var nanosecond = 0
        if take(UInt8(ascii: ".")) {
            var count = 0
            while index < bytes.endIndex, TOMLParser.isDigit(bytes[index]) {
                if count < 9 { nanosecond = nanosecond * 10 + Int(bytes[index] - UInt8(ascii: "0")) }
                count += 1
                index += 1
            }
            guard count > 0 else { return nil }
            for _ in min(count, 9)..<9 { nanosecond *= 10 }
        }
        return TOMLTime(hour: hour, minute: minute, second: second, nanosecond: nanosecond)
    }
}
