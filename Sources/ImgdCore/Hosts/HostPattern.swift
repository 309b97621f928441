import ImgdBase

/// Which hosts a `[host."…"]` table of the configuration applies to: one exact host name
/// (`images.example.com`, an IPv4 literal or a bracketed IPv6 one), or every name below a
/// domain (`*.example.com`: `a.example.com` and `a.b.example.com`, not `example.com` itself),
/// optionally with a port (`images.example.com:8443`, `[::1]:8443`, `*.example.com:8443`).
///
/// Without a port a pattern names every port of its hosts (caps and rates apply to each); with
/// one it names that port only. Request headers are bound more tightly: see
/// `HostRules.Rule.headers(for:)` (the key's port, or the scheme's default).
///
/// Hosts are compared lower-cased, as ``ImageURL`` normalises them.
public struct HostPattern: Hashable, Sendable, CustomStringConvertible {
    /// The pattern, lower-cased: the host part, then `:port` when it names one (written as a
    /// decimal number without leading zeros).
    public let text: String
    /// `.example.com` for `*.example.com`; nil for an exact host.
    private let suffix: String?
    /// The host part, lower-cased (`*.example.com`, `images.example.com`, `[::1]`).
    public let host: String
    /// The one port this pattern names; nil for every port.
    public let port: Int?

    /// Parses `text`; throws a reason a person can act on when it is neither a host nor
    /// `*.` followed by one, each perhaps with `:port`.
    public init(_ text: String) throws(HostPatternError) {
        var lowered = text.lowercased()
        // A port: after the last colon of a name or an IPv4 address, after `]` of an IPv6 one.
        let portMark: String.Index? =
            if lowered.hasPrefix("[") {
                lowered.lastIndex(of: "]").map { lowered.index(after: $0) }.flatMap { $0 < lowered.endIndex && lowered[$0] == ":" ? $0 : nil }
            } else if lowered.filter({ $0 == ":" }).count == 1 {
                lowered.firstIndex(of: ":")
            } else {
                nil
            }
        if let portMark {
            let digits = lowered[lowered.index(after: portMark)...]
            guard !digits.isEmpty, digits.count <= 5, digits.utf8.allSatisfy({ (0x30...0x39).contains($0) }),
                let number = Int(digits), (1...65535).contains(number)
            else {
                throw HostPatternError(pattern: text, reason: "a port is a number from 1 to 65535, as in images.example.com:8443")
            }
            port = number
            lowered = String(lowered[..<portMark])
        } else {
            port = nil
        }
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
            throw HostPatternError(pattern: text, reason: "an IPv6 address goes in brackets, as in [::1] or [::1]:8443")
        }
        guard host.utf8.allSatisfy({ $0 > 0x20 && $0 != 0x7F && $0 != UInt8(ascii: "/") }) else {
            throw HostPatternError(pattern: text, reason: "a host name has no spaces, slashes or control characters")
        }
        self.host = lowered
        self.text = port.map { "\(lowered):\($0)" } ?? lowered
    }

    /// Whether `host` (lower-cased, as ``ImageURL/host`` gives it) is one this pattern names,
    /// on any port (a pattern with a port names only that one: see ``matches(_:port:)``).
    public func matches(_ host: String) -> Bool {
        guard let suffix else { return host == self.host }
        return host.count > suffix.count && host.hasSuffix(suffix)
    }

    /// Whether `host` on `port` is one this pattern names: its host, and its port if it names
    /// one. A nil `port` (unknown) is named only by a pattern without a port.
    public func matches(_ host: String, port: Int?) -> Bool {
        guard self.port == nil || self.port == port else { return false }
        return matches(host)
    }

    /// How specific the pattern is: an exact host beats any wildcard, a longer wildcard a
    /// shorter one (`*.cdn.example.com` before `*.example.com`), and of the same host, the
    /// pattern with a port beats the one without.
    public var specificity: Int {
        let portBonus = port == nil ? 0 : 1
        return suffix == nil ? Int.max - 1 + portBonus : host.utf8.count * 2 + portBonus
    }

    public var description: String { text }
}

/// Why a host pattern is not one.
public struct HostPatternError: Error, Sendable, Equatable, CustomStringConvertible {
    public let pattern: String
    public let reason: String

    public var description: String { "'\(EchoedText.cut(pattern, limit: 200))' is not a host pattern: \(reason)" }
}
