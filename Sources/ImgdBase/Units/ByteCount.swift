/// A number of bytes, as written in flags and configuration ("64 MiB", "500MB", "1.5GiB").
///
/// Binary units (KiB, MiB, GiB, TiB) are powers of 1024 and decimal units (KB, MB, GB, TB)
/// powers of 1000, as the IEC prefixes say; both are accepted because people write both.
/// ``description`` always prints binary units, which is what memory limits are made of.
public struct ByteCount: Sendable, Hashable, Comparable, CustomStringConvertible, ExpressibleByIntegerLiteral {
    /// The number of bytes.
    public var bytes: Int

    /// The longest text ``init(parsing:)`` reads; longer input is an error, not a slow parse.
    public static let maximumTextLength = 64

    /// The units ``init(parsing:)`` accepts, lower-cased, with their multipliers. No unit
    /// means bytes.
    static let units: [(name: String, multiplier: Int)] = [
        ("b", 1),
        ("kb", 1000), ("mb", 1000 * 1000), ("gb", 1000 * 1000 * 1000), ("tb", 1000 * 1000 * 1000 * 1000),
        ("kib", 1 << 10), ("mib", 1 << 20), ("gib", 1 << 30), ("tib", 1 << 40),
    ]

    /// What every error message offers instead.
    static let expectedSize = "a number with an optional unit (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)"

    /// Exactly `bytes` bytes.
    public init(_ bytes: Int) {
        self.bytes = bytes
    }

    public init(integerLiteral value: Int) {
        self.init(value)
    }

    /// Reads "1GiB", "64 MiB", "500MB", "10KB", "12345" (bytes) or "1.5GiB".
    ///
    /// Units are case-insensitive and may follow the number after a space; surrounding
    /// whitespace is ignored. A fraction is allowed with a unit larger than a byte and is
    /// rounded down to a whole byte ("0.1KiB" is 102 bytes). Throws for an empty text, a sign,
    /// an unknown unit, a fraction of a byte, a value above `Int.max` bytes, or a text longer
    /// than ``maximumTextLength``.
    public init(parsing text: String) throws(UnitParseError) {
        func failure(_ expected: String = ByteCount.expectedSize) -> UnitParseError {
            UnitParseError(text: text, expected: expected, kind: .size)
        }
        guard text.utf8.count <= Self.maximumTextLength else {
            throw failure("at most \(Self.maximumTextLength) characters")
        }
        guard let number = DecimalNumberText(text) else {
            if DecimalNumberText.startsWithSign(text) {
                throw failure("a number without a sign, with an optional unit (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)")
            }
            throw failure()
        }
        let unit = number.unit.lowercased()
        let multiplier: Int
        if unit.isEmpty {
            multiplier = 1
        } else if let known = Self.units.first(where: { $0.name == unit }) {
            multiplier = known.multiplier
        } else {
            throw failure()
        }
        if multiplier == 1, number.hasFraction {
            throw failure("a whole number of bytes (a fraction needs a unit such as KiB or MB)")
        }
        guard let value = number.scaled(by: Int128(multiplier)), value <= Int128(Int.max) else {
            throw failure("at most \(Int.max) bytes (8 EiB)")
        }
        self.bytes = Int(value)
    }

    public static func < (lhs: ByteCount, rhs: ByteCount) -> Bool { lhs.bytes < rhs.bytes }

    /// "900 B", "64 MiB", "1.5 GiB": the largest binary unit (up to TiB, the largest
    /// ``init(parsing:)`` reads back) that keeps the number at least 1, with at most one
    /// decimal, rounded half up.
    public var description: String {
        let names = ["B", "KiB", "MiB", "GiB", "TiB"]
        let magnitude = Int128(bytes.magnitude)
        let sign = bytes < 0 ? "-" : ""
        var unit = 0
        while unit < names.count - 1, magnitude >= Int128(1) << (10 * (unit + 1)) {
            unit += 1
        }
        if unit == 0 { return "\(sign)\(magnitude) B" }
        let divisor = Int128(1) << (10 * unit)
        var tenths = (magnitude * 10 + divisor / 2) / divisor
        // Rounding can carry into the next unit: 1023.96 KiB prints as "1 MiB", not "1024 KiB".
        if tenths >= 10 * 1024, unit < names.count - 1 {
            unit += 1
            tenths = (magnitude * 10 + (divisor << 10) / 2) / (divisor << 10)
        }
        let whole = tenths / 10
        let decimal = tenths % 10
        return decimal == 0 ? "\(sign)\(whole) \(names[unit])" : "\(sign)\(whole).\(decimal) \(names[unit])"
    }
}
