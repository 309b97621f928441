#if canImport(Glibc)
import Glibc
#endif

extension IPRange.Address: CustomStringConvertible {
    /// An address from its two 64-bit halves.
    public init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    /// `a.b.c.d` in its IPv4-mapped form (`::ffff:a.b.c.d`), the form imgd stores IPv4 in.
    init(ipv4 value: UInt32) { self.init(high: 0, low: 0x0000_FFFF_0000_0000 | UInt64(value)) }

    /// Parses a URL's host when it is a literal address, as libcurl's URL API gives it: an IPv6
    /// literal in brackets (a zone id, `%eth0`, is dropped), or IPv4 in any form the C library's
    /// `inet_aton` takes (`127.1`, `0x7f.0.0.1`, `2130706433`; libcurl normalises those itself,
    /// but a proxy given one it did not may still read it as an address). One trailing dot is
    /// ignored (`169.254.169.254.` is the same address to a resolver). nil for a host name.
    public init?(urlHost host: String) {
        if host.hasPrefix("[") {
            guard host.hasSuffix("]") else { return nil }
            var inner = host.dropFirst().dropLast()
            if let zone = inner.firstIndex(of: "%") { inner = inner[..<zone] }
            guard inner.contains(":"), let parsed = IPRange.Address(String(inner)) else { return nil }
            self = parsed
            return
        }
        var name = host.utf8[...]
        if name.last == UInt8(ascii: ".") { name = name.dropLast() }
        // inet_aton reads a number and stops at the first blank, so a host with one is a name.
        // Bytes, not Characters: this runs for every transfer, and grapheme breaking cost more
        // than the rest of the policy check (bench/README.md, the https profile).
        guard !name.isEmpty, name.allSatisfy(Self.mayBeInAddress) else { return nil }
        var parsed = in_addr()
        guard inet_aton(String(Substring(name)), &parsed) != 0 else { return nil }
        self.init(ipv4: UInt32(bigEndian: parsed.s_addr))
    }

    /// Hex digits, `.`, and the `x` of `0x`: what an address in any `inet_aton` form is made of.
    private static func mayBeInAddress(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"),
            UInt8(ascii: "A")...UInt8(ascii: "F"), UInt8(ascii: "."), UInt8(ascii: "x"), UInt8(ascii: "X"):
            true
        default: false
        }
    }

    /// True for an IPv4 address (stored IPv4-mapped).
    public var isIPv4: Bool { high == 0 && low >> 32 == 0xFFFF }

    /// True for the addresses that mean "this host" when connected to: `0.0.0.0` and `::`.
    /// Linux connects a socket aimed at either to the loopback interface.
    public var isUnspecified: Bool { high == 0 && (low == 0 || low == 0x0000_FFFF_0000_0000) }

    /// The IPv4 address an IPv6 address carries and is delivered to, in IPv4-mapped form; nil when
    /// it carries none (or is IPv4 already). The forms: IPv4-compatible `::a.b.c.d` (but not `::`
    /// nor `::1`), NAT64 `64:ff9b::a.b.c.d` (a translator on the path connects to a.b.c.d), and
    /// 6to4 `2002:AABB:CCDD::/48` (a relay sends it to AA.BB.CC.DD). IPv4-mapped addresses are
    /// IPv4 already: ranges are stored in that form.
    public var embeddedIPv4: IPRange.Address? {
        let low32 = UInt32(truncatingIfNeeded: low)
        if high == 0, low >> 32 == 0, low > 1 { return IPRange.Address(ipv4: low32) }
        if high == 0x0064_FF9B_0000_0000, low >> 32 == 0 { return IPRange.Address(ipv4: low32) }
        if high >> 48 == 0x2002 { return IPRange.Address(ipv4: UInt32(truncatingIfNeeded: high >> 16)) }
        return nil
    }

    /// `a.b.c.d` for IPv4, the compressed IPv6 text otherwise.
    public var description: String {
        var bytes = [UInt8](repeating: 0, count: 16)
        withUnsafeBytes(of: high.bigEndian) { bytes.replaceSubrange(0..<8, with: $0) }
        withUnsafeBytes(of: low.bigEndian) { bytes.replaceSubrange(8..<16, with: $0) }
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        let written =
            isIPv4
            ? inet_ntop(AF_INET, Array(bytes[12..<16]), &text, socklen_t(text.count))
            : inet_ntop(AF_INET6, bytes, &text, socklen_t(text.count))
        guard written != nil else { return "?" }
        return text.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }
}
