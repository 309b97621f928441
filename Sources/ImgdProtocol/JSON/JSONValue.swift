/// Any JSON value, as the control socket reads and writes it.
///
/// Integers that fit in 64 bits stay exact (``int(_:)``), so an `id` such as
/// `9223372036854775807` is echoed digit for digit; every other number (`1.5`, `1e3`, integers
/// beyond 64 bits) is a ``double(_:)``, written back in its shortest round-trip form. Objects keep
/// the last of duplicate keys and are written with their keys sorted (see ``jsonText``).
public enum JSONValue: Sendable, Hashable {
    case null
    case bool(Bool)
    /// A number written without a fraction or an exponent that fits in `Int64`.
    case int(Int64)
    /// Any other number. Never NaN or infinite when parsed; written as `null` if built so.
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])
}

// MARK: - Building values

// The builders are `@inlinable`: every reply is made of them, and across the module boundary a
// generic one (the integer initialiser) would otherwise run unspecialised, through witness tables.
extension JSONValue {
    /// An integer: exact when it fits in `Int64`, else the nearest `Double`.
    @inlinable public init<Integer: BinaryInteger>(_ value: Integer) {
        if let exact = Int64(exactly: value) {
            self = .int(exact)
        } else {
            self = .double(Double(value))
        }
    }

    /// A number with a fraction.
    @inlinable public init(_ value: Double) { self = .double(value) }

    @inlinable public init(_ value: Bool) { self = .bool(value) }

    @inlinable public init(_ value: String) { self = .string(value) }

    /// An array of strings, a common shape for results (`["subscribed": …]`).
    @inlinable public init(_ values: [String]) { self = .array(values.map(JSONValue.string)) }

    /// `value`, or `null` when it is `nil`: for optional fields of a result.
    @inlinable public init(_ value: JSONValue?) { self = value ?? .null }
}

extension JSONValue: ExpressibleByNilLiteral {
    @inlinable public init(nilLiteral: ()) { self = .null }
}

extension JSONValue: ExpressibleByBooleanLiteral {
    @inlinable public init(booleanLiteral value: Bool) { self = .bool(value) }
}

extension JSONValue: ExpressibleByIntegerLiteral {
    @inlinable public init(integerLiteral value: Int64) { self = .int(value) }
}

extension JSONValue: ExpressibleByFloatLiteral {
    @inlinable public init(floatLiteral value: Double) { self = .double(value) }
}

extension JSONValue: ExpressibleByStringLiteral {
    @inlinable public init(stringLiteral value: String) { self = .string(value) }
}

extension JSONValue: ExpressibleByArrayLiteral {
    @inlinable public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
}

extension JSONValue: ExpressibleByDictionaryLiteral {
    /// An object; a repeated key keeps its last value.
    @inlinable public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }
}

// MARK: - Reading values

extension JSONValue {
    /// The member `key` of an object; `nil` for a missing key or a value that is not an object.
    public subscript(key: String) -> JSONValue? {
        guard case .object(let members) = self else { return nil }
        return members[key]
    }

    public var isNull: Bool { self == .null }

    public var boolValue: Bool? {
        guard case .bool(let value) = self else { return nil }
        return value
    }

    public var stringValue: String? {
        guard case .string(let value) = self else { return nil }
        return value
    }

    /// The value as an exact integer: an `int`, or a `double` with no fraction that fits.
    public var int64Value: Int64? {
        switch self {
        case .int(let value): return value
        case .double(let value): return Int64(exactly: value)
        default: return nil
        }
    }

    /// ``int64Value`` as an `Int`.
    public var intValue: Int? { int64Value.flatMap { Int(exactly: $0) } }

    /// Any number as a `Double` (an integer beyond 2^53 is rounded).
    public var doubleValue: Double? {
        switch self {
        case .int(let value): return Double(value)
        case .double(let value): return value
        default: return nil
        }
    }

    public var arrayValue: [JSONValue]? {
        guard case .array(let value) = self else { return nil }
        return value
    }

    public var objectValue: [String: JSONValue]? {
        guard case .object(let value) = self else { return nil }
        return value
    }

    /// A short name of the value's kind for messages: "a string", "an object", …
    public var kindDescription: String {
        switch self {
        case .null: return "null"
        case .bool: return "a boolean"
        case .int, .double: return "a number"
        case .string: return "a string"
        case .array: return "an array"
        case .object: return "an object"
        }
    }
}

extension JSONValue: CustomStringConvertible {
    /// The compact JSON text (``jsonText``).
    public var description: String { jsonText }
}
