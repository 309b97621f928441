/// A text split into an unsigned decimal number and the unit after it: the common part of
/// reading sizes and durations.
///
/// Accepts optional surrounding whitespace, digits with at most one `.` followed by digits,
/// optional spaces, then letters. Anything else (a sign, an exponent, a second number, a
/// missing number) makes the initialiser return nil.
struct DecimalNumberText {
    /// Digits before the point ("1" of "1.5").
    let integerDigits: Substring
    /// Digits after the point ("5" of "1.5"); empty without a point.
    let fractionDigits: Substring
    /// The letters after the number, as written.
    let unit: Substring

    /// True when a non-zero fraction was written ("1.5", not "1" or "1.0").
    var hasFraction: Bool { fractionDigits.contains { $0 != "0" } }

    init?(_ text: String) {
        let trimmed = text.drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed()
        let whole = Substring(trimmed)
        let integerEnd = whole.firstIndex { !$0.isASCIIDigit } ?? whole.endIndex
        integerDigits = whole[..<integerEnd]
        var rest = whole[integerEnd...]
        if rest.first == "." {
            rest = rest.dropFirst()
            let fractionEnd = rest.firstIndex { !$0.isASCIIDigit } ?? rest.endIndex
            fractionDigits = rest[..<fractionEnd]
            guard !fractionDigits.isEmpty else { return nil }
            rest = rest[fractionEnd...]
        } else {
            fractionDigits = ""
        }
        guard !integerDigits.isEmpty else { return nil }
        rest = rest.drop { $0 == " " }
        guard rest.allSatisfy({ $0.isASCII && $0.isLetter }) else { return nil }
        unit = rest
    }

    /// True when `text` starts (after whitespace) with `-` or `+`: worth its own message, since
    /// a negative size or duration is a mistake people make on purpose.
    static func startsWithSign(_ text: String) -> Bool {
        let first = text.drop(while: \.isWhitespace).first
        return first == "-" || first == "+"
    }

    /// The number times `multiplier`, rounded down; nil when it does not fit in `Int64`.
    ///
    /// Exact: the fraction is multiplied before it is divided, in 128 bits, so "1.5GiB" is
    /// exactly 1,610,612,736 bytes and no binary floating point is involved.
    func scaled(by multiplier: Int128) -> Int128? {
        var integer: Int128 = 0
        for digit in integerDigits {
            integer = integer * 10 + Int128(digit.asciiValue! - 48)
            guard integer <= Int128(Int64.max) else { return nil }
        }
        let (product, overflow) = integer.multipliedReportingOverflow(by: multiplier)
        guard !overflow, product <= Int128(Int64.max) else { return nil }
        // 18 digits keep 10^digits and fraction × multiplier (multiplier < 2^50) inside 128
        // bits; later digits cannot change a whole-byte or whole-nanosecond result by more
        // than rounding already does.
        var fraction: Int128 = 0
        var scale: Int128 = 1
        for digit in fractionDigits.prefix(18) {
            fraction = fraction * 10 + Int128(digit.asciiValue! - 48)
            scale *= 10
        }
        return product + fraction * multiplier / scale
    }
}

extension Character {
    /// `0`–`9` only (not other scripts' digits, which `isNumber` accepts).
    fileprivate var isASCIIDigit: Bool { isASCII && isWholeNumber }
}
