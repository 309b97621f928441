/// Which hosts a `[host."…"]` table of the configuration applies to: one exact host name
/// (`images.example.com`, an IPv4 literal or a bracketed IPv6 one), or every name below a
/// domain (`*.example.com`: `a.example.com` and `a.b.example.com`, not `example.com` itself).
/// The port never matters: a table applies to every port of its hosts.
///
/// Hosts are compared lower-cased, as ``ImageURL`` normalises them.
public struct HostPattern: Hashable, Sendable, CustomStringConvertible {
    /// The pattern as written, lower-cased.
    public let text: String
    /// `.example.com` for `*.example.com`; nil for an exact host.
    private let suffix: String?

    /// Parses `text`; throws a reason a person can act on when it is neither a host nor
    /// `*.` followed by one.
    public init(_ text: String) throws(HostPatternError) {
        let lowered = text.lowercased()
        let host: Substring
        if lowered.hasPrefix("*.") {
            host = lowered.dropFirst(2)
            suffix = String(lowered.dropFirst(1))
        } else {
            host = Substring(lowered)
            suffix = nil
        }
        guard !host.isEmpty else { throw HostPatternError(pattern: text, reason: "no host") }
        guard !host.contains("*") else {
            throw HostPatternError(pattern: text, reason: "'*' is allowed only as the first label, as in *.example.com")
        }
        guard !host.contains(":") || (host.hasPrefix("[") && host.hasSuffix("]")) else {
            throw HostPatternError(pattern: text, reason: "a host, without a port (a table applies to every port)")
        }
        guard host.utf8.allSatisfy({ $0 > 0x20 && $0 != 0x7F && $0 != UInt8(ascii: "/") }) else {
            throw HostPatternError(pattern: text, reason: "a host name has no spaces, slashes or control characters")
        }
        self.text = lowered
    }

    /// Whether `host` (lower-cased, as ``ImageURL/host`` gives it) is one this pattern names.
    public func matches(_ host: String) -> Bool {
        guard let suffix else { return host == text }
        return host.count > suffix.count && host.hasSuffix(suffix)
    }

    /// How specific the pattern is: an exact host beats any wildcard, a longer wildcard a
    /// shorter one (`*.cdn.example.com` before `*.example.com`).
    public var specificity: Int { suffix == nil ? Int.max : text.utf8.count }

    public var description: String { text }
}

/// Why a host pattern is not one.
public struct HostPatternError: Error, Sendable, Equatable, CustomStringConvertible {
    public let pattern: String
    public let reason: String

    public var description: String { "'\(EchoedText.cut(pattern, limit: 200))' is not a host pattern: \(reason)" }
}
