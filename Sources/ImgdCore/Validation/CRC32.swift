import CZlib

/// The CRC-32 of ISO 3309 / ITU-T V.42 (polynomial 0xEDB88320, the one PNG chunks carry),
/// computed by zlib, whose `crc32` is table-driven with slicing (and SIMD where the CPU has it).
struct CRC32: Equatable {
    /// The checksum of everything added so far.
    private(set) var value: UInt32 = 0

    /// Adds `bytes` to the checksum.
    mutating func add(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return }
        // zlib's length is a 32-bit uInt: feed a larger buffer in slices.
        var offset = 0
        while offset < bytes.count {
            let length = min(bytes.count - offset, Int(UInt32.max))
            value = UInt32(
                truncatingIfNeeded: crc32(
                    uLong(value), (base + offset).assumingMemoryBound(to: Bytef.self), uInt(length)))
            offset += length
        }
    }

    /// Adds `bytes` to the checksum.
    mutating func add(_ bytes: some Sequence<UInt8>) {
        if bytes.withContiguousStorageIfAvailable({ add(UnsafeRawBufferPointer($0)) }) == nil {
            Array(bytes).withUnsafeBytes { add($0) }
        }
    }

    /// The checksum of `bytes`.
    static func checksum(_ bytes: some Sequence<UInt8>) -> UInt32 {
        var crc = CRC32()
        crc.add(bytes)
        return crc.value
    }
}
