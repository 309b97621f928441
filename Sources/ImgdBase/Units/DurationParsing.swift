extension Duration {
    /// The units ``parsing(_:)`` accepts, lower-cased, in nanoseconds. No unit means seconds.
    static let parsingUnits: [(name: String, nanoseconds: Int64)] = [
        ("ms", 1_000_000),
        ("s", 1_000_000_000),
        ("m", 60 * 1_000_000_000),
        ("h", 3600 * 1_000_000_000),
        ("d", 86_400 * 1_000_000_000),
        ("w", 7 * 86_400 * 1_000_000_000),
    ]

    /// The longest duration ``parsing(_:)`` returns: `Int64.max` nanoseconds (about 292 years),
    /// so every clock and timer API can take the result.
    public static let parsingLimit = Duration.nanoseconds(Int64.max)

    /// Reads "30m", "12h", "7d", "90s", "500ms", "1w" or "1.5h"; a bare number is seconds.
    ///
    /// Units are case-insensitive and may follow the number after a space; surrounding
    /// whitespace is ignored. A fraction is rounded down to a whole nanosecond. Throws for an
    /// empty text, a sign, an unknown unit, a value above ``parsingLimit``, or a text longer
    /// than 64 characters.
    public static func parsing(_ text: String) throws(UnitParseError) -> Duration {
        let expected = "a number with an optional unit (ms, s, m, h, d, w; seconds when none)"
        func failure(_ expected: String = expected) -> UnitParseError {
            UnitParseError(text: text, expected: expected, kind: .duration)
        }
        guard text.utf8.count <= ByteCount.maximumTextLength else {
            throw failure("at most \(ByteCount.maximumTextLength) characters")
        }
        guard let number = DecimalNumberText(text) else {
            if DecimalNumberText.startsWithSign(text) {
                throw failure("a number without a sign, with an optional unit (ms, s, m, h, d, w; seconds when none)")
            }
            throw failure()
        }
        let unit = number.unit.lowercased()
        let multiplier: Int64
        if unit.isEmpty {
            multiplier = 1_000_000_000
        } else if let known = parsingUnits.first(where: { $0.name == unit }) {
            multiplier = known.nanoseconds
        } else {
            throw failure()
        }
        guard let nanoseconds = number.scaled(by: Int128(multiplier)), nanoseconds <= Int128(Int64.max) else {
            throw failure("at most 106751d (292 years)")
        }
        return .nanoseconds(Int64(nanoseconds))
    }
}
