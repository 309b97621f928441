@testable import ImgctlCLI
import ImgdProtocol

/// The field names and value types of a JSON value, without its values: what a client reading
/// a reply relies on. Integers and fractions are told apart (the daemon writes a `Double` with a
/// fraction, `3.0`, and an `Int` without), and `null` is a type of its own. An array's shape is
/// the set of its elements' shapes (an empty array has none).
indirect enum JSONShape: Hashable, CustomStringConvertible {
    case null, bool, int, double, string
    case array(Set<JSONShape>)
    case object([String: JSONShape])

    init(_ value: JSONValue) {
        switch value {
        case .null: self = .null
        case .bool: self = .bool
        case .int: self = .int
        case .double: self = .double
        case .string: self = .string
        case .array(let elements): self = .array(Set(elements.map(JSONShape.init)))
        case .object(let members): self = .object(members.mapValues(JSONShape.init))
        }
    }

    var description: String {
        switch self {
        case .null: "null"
        case .bool: "bool"
        case .int: "int"
        case .double: "double"
        case .string: "string"
        case .array(let elements): "[" + elements.map(\.description).sorted().joined(separator: " | ") + "]"
        case .object(let members): "{" + members.keys.sorted().map { "\($0): \(members[$0]!)" }.joined(separator: ", ") + "}"
        }
    }

    /// Where `self` (a recorded fixture) and `live` (the daemon's reply now) differ, one line per
    /// place: a field only one of them has, or a value of another type. Empty when they agree.
    func differences(from live: JSONShape, at path: String = "result") -> [String] {
        switch (self, live) {
        case (.object(let recorded), .object(let current)):
            var found: [String] = []
            for key in Set(recorded.keys).union(current.keys).sorted() {
                switch (recorded[key], current[key]) {
                case (let a?, let b?): found += a.differences(from: b, at: path + "." + key)
                case (_?, nil): found.append("\(path).\(key): in the fixture, not sent by the daemon")
                case (nil, let b?): found.append("\(path).\(key): sent by the daemon (\(b)), missing from the fixture")
                case (nil, nil): break
                }
            }
            return found
        case (.array(let recorded), .array(let current)) where recorded.count == 1 && current.count == 1:
            return recorded.first!.differences(from: current.first!, at: path + "[]")
        default:
            return self == live ? [] : ["\(path): \(self) in the fixture, \(live) from the daemon"]
        }
    }
}
