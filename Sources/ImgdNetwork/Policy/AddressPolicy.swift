#if canImport(Glibc)
import Glibc
#endif

/// Which peer addresses imgd refuses to connect to. Checked when each socket is opened (so it
/// covers every DNS answer and every redirect hop, not just the URL as written), and, for a URL
/// whose host is a literal address, before its request is sent: with a proxy the only socket
/// goes to the proxy, so that is the only check that sees the target (host *names* are then
/// resolved by the proxy, and are its responsibility).
///
/// IPv4 ranges are stored in their IPv4-mapped IPv6 form (`::ffff:a.b.c.d`), so one rule also
/// matches the mapped spelling of the same address. Other IPv6 forms that carry an IPv4 address
/// are checked as that address too, and `0.0.0.0` and `::` as loopback: see ``refusal(of:)``.
public struct AddressPolicy: Sendable, Equatable {
    /// The ranges refused.
    public var deniedRanges: [IPRange]

    public init(deniedRanges: [IPRange]) { self.deniedRanges = deniedRanges }

    /// By default: link-local and cloud metadata endpoints (169.254.0.0/16, which holds
    /// 169.254.169.254; fe80::/10; fd00:ec2::254/128; 100.100.100.200/32) and 0.0.0.0/8 (and so
    /// `::`, which like 0.0.0.0 reaches this host). Loopback and private ranges are allowed: imgd
    /// is often pointed at a local mirror.
    public static let `default` = AddressPolicy(deniedRanges: [
        IPRange("169.254.0.0/16")!, IPRange("0.0.0.0/8")!, IPRange("fe80::/10")!,
        IPRange("fd00:ec2::254/128")!, IPRange("100.100.100.200/32")!,
    ])

    /// The denied range that refuses `address` (16 bytes, IPv6 or IPv4-mapped), if any, after the
    /// normalisation of ``refusal(of:)``.
    public func denyingRange(for address: IPRange.Address) -> IPRange? {
        refusal(of: address)?.range
    }
}

/// An address range in CIDR notation (`10.0.0.0/8`, `fe80::/10`, or a single address).
public struct IPRange: Sendable, Hashable, CustomStringConvertible {
    /// A 128-bit address as two big-endian halves.
    public struct Address: Sendable, Hashable {
        public var high: UInt64
        public var low: UInt64

        /// Reads 16 bytes in network order.
        public init(bytes: UnsafeRawBufferPointer) {
            high = bytes.loadUnaligned(fromByteOffset: 0, as: UInt64.self).bigEndian
            low = bytes.loadUnaligned(fromByteOffset: 8, as: UInt64.self).bigEndian
        }

        /// Parses a textual IPv4 or IPv6 address (IPv4 becomes IPv4-mapped).
        public init?(_ text: String) {
            var bytes = [UInt8](repeating: 0, count: 16)
            if text.contains(":") {
                guard inet_pton(AF_INET6, text, &bytes) == 1 else { return nil }
            } else {
                var v4 = [UInt8](repeating: 0, count: 4)
                guard inet_pton(AF_INET, text, &v4) == 1 else { return nil }
                bytes[10] = 0xFF
                bytes[11] = 0xFF
                bytes.replaceSubrange(12..<16, with: v4)
            }
            self = bytes.withUnsafeBytes { Address(bytes: $0) }
        }
    }

    private let base: Address
    private let prefixLength: Int
    /// As written.
    public let description: String

    /// Parses `a.b.c.d/n`, `x::y/n` or a bare address; nil if malformed.
    public init?(_ text: String) {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count <= 2, let address = Address(String(parts[0])) else { return nil }
        let isV4 = !parts[0].contains(":")
        let width = isV4 ? 32 : 128
        var length = width
        if parts.count == 2 {
            guard let parsed = Int(parts[1]), (0...width).contains(parsed) else { return nil }
            length = parsed
        }
        base = address
        prefixLength = isV4 ? length + 96 : length
        description = text
    }

    /// True when `address` lies in this range.
    public func contains(_ address: Address) -> Bool {
        let (highMask, lowMask) = Self.masks(prefixLength)
        return (address.high & highMask) == (base.high & highMask) && (address.low & lowMask) == (base.low & lowMask)
    }

    private static func masks(_ length: Int) -> (UInt64, UInt64) {
        func mask(_ bits: Int) -> UInt64 { bits <= 0 ? 0 : bits >= 64 ? .max : ~(UInt64.max >> UInt64(bits)) }
        return (mask(length), mask(length - 64))
    }
}
