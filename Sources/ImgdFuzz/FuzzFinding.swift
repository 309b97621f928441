/// An invariant a fuzz target checks that did not hold for an input: what was expected, and
/// what happened instead.
public struct FuzzFinding: Error, CustomStringConvertible, Sendable {
    /// The target that found it.
    public let target: String
    /// What did not hold, with the values that show it.
    public let message: String

    public init(target: String, _ message: String) {
        self.target = target
        self.message = message
    }

    public var description: String { "\(target): \(message)" }
}
