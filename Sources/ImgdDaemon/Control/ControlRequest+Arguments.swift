import ImgdProtocol

/// Typed access to a request's arguments. Each accessor throws
/// ``ControlError/invalidArgument(field:reason:)`` naming the field, so a handler can write
/// `let url = try request.string("url")` and return the error as it comes. A member whose value
/// is `null` counts as absent.
extension ControlRequest {
    /// The argument `field`, or `nil` when it is absent or `null`.
    public func value(_ field: String) -> JSONValue? {
        guard let value = arguments[field], value != .null else { return nil }
        return value
    }

    /// A required string.
    public func string(_ field: String) throws(ControlError) -> String {
        guard let text = try optionalString(field) else { throw missing(field) }
        return text
    }

    /// A string that may be absent.
    public func optionalString(_ field: String) throws(ControlError) -> String? {
        guard let value = value(field) else { return nil }
        guard let text = value.stringValue else { throw wrongType(field, "a string", value) }
        return text
    }

    /// A boolean, `defaultValue` when absent.
    public func bool(_ field: String, default defaultValue: Bool) throws(ControlError) -> Bool {
        guard let value = value(field) else { return defaultValue }
        guard let flag = value.boolValue else { throw wrongType(field, "true or false", value) }
        return flag
    }

    /// A required, non-empty array of strings.
    public func strings(_ field: String) throws(ControlError) -> [String] {
        guard let texts = try optionalStrings(field) else { throw missing(field) }
        return texts
    }

    /// A non-empty array of strings that may be absent.
    public func optionalStrings(_ field: String) throws(ControlError) -> [String]? {
        guard let value = value(field) else { return nil }
        guard let elements = value.arrayValue else { throw wrongType(field, "an array of strings", value) }
        guard !elements.isEmpty else { throw .invalidArgument(field: field, reason: "must not be empty") }
        var texts: [String] = []
        texts.reserveCapacity(elements.count)
        for (index, element) in elements.enumerated() {
            guard let text = element.stringValue else {
                throw .invalidArgument(field: field, reason: "element \(index) must be a string, not \(element.kindDescription)")
            }
            texts.append(text)
        }
        return texts
    }

    /// A required integer in `range`. A number with a zero fraction (`3.0`) counts as an integer.
    public func int(_ field: String, in range: ClosedRange<Int> = Int.min...Int.max) throws(ControlError) -> Int {
        guard let number = try optionalInt(field, in: range) else { throw missing(field) }
        return number
    }

    /// An integer in `range`, `defaultValue` when absent.
    public func int(_ field: String, default defaultValue: Int, in range: ClosedRange<Int> = Int.min...Int.max) throws(ControlError) -> Int {
        try optionalInt(field, in: range) ?? defaultValue
    }

    /// An integer in `range` that may be absent.
    public func optionalInt(_ field: String, in range: ClosedRange<Int> = Int.min...Int.max) throws(ControlError) -> Int? {
        guard let value = value(field) else { return nil }
        guard let number = value.intValue else { throw wrongType(field, "an integer", value) }
        guard range.contains(number) else {
            throw .invalidArgument(field: field, reason: "must be between \(range.lowerBound) and \(range.upperBound), not \(number)")
        }
        return number
    }

    /// One of `choices`, `defaultValue` when absent (`priority`: `"high"` | `"normal"`).
    public func choice(_ field: String, of choices: [String], default defaultValue: String) throws(ControlError) -> String {
        guard let text = try optionalString(field) else { return defaultValue }
        guard choices.contains(text) else {
            let listed = choices.map { "\"\($0)\"" }.joined(separator: ", ")
            throw .invalidArgument(field: field, reason: "must be one of \(listed), not \"\(text)\"")
        }
        return text
    }

    /// An object that may be absent.
    public func optionalObject(_ field: String) throws(ControlError) -> [String: JSONValue]? {
        guard let value = value(field) else { return nil }
        guard let members = value.objectValue else { throw wrongType(field, "an object", value) }
        return members
    }

    private func missing(_ field: String) -> ControlError {
        .invalidArgument(field: field, reason: "is required")
    }

    private func wrongType(_ field: String, _ expected: String, _ value: JSONValue) -> ControlError {
        .invalidArgument(field: field, reason: "must be \(expected), not \(value.kindDescription)")
    }
}
