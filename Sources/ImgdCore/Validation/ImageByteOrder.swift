/// Which end of a multi-byte integer comes first in an image format's headers.
///
/// JPEG, PNG and ISO-BMFF are big-endian, GIF, BMP, ICO and WebP little-endian, and a TIFF
/// says which in its first two bytes.
enum ImageByteOrder: Sendable {
    case bigEndian, littleEndian

    /// The unsigned value of `bytes` (at most 8 of them) read in this order.
    func decode(_ bytes: some Collection<UInt8>) -> UInt64 {
        var value: UInt64 = 0
        switch self {
        case .bigEndian:
            for byte in bytes { value = value << 8 | UInt64(byte) }
        case .littleEndian:
            for byte in bytes.reversed() { value = value << 8 | UInt64(byte) }
        }
        return value
    }
}
