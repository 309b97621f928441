import CISAL

/// The CRC-32 of ISO 3309 / ITU-T V.42 (polynomial 0xEDB88320, the one PNG chunks and gzip
/// carry), computed by ISA-L's `crc32_gzip_refl`, which folds 64 bytes at a time with carry-less
/// multiplication where the CPU has it (PCLMULQDQ, ARMv8 PMULL) and picks a table otherwise.
/// On a typical 22 KB image it took 2.3 µs here against zlib's 9.9 µs; validating 20,000 small
/// images checks every byte of each, so this is on the warming path.
struct CRC32: Equatable {
    /// The checksum of everything added so far.
    private(set) var value: UInt32 = 0

    /// Adds `bytes` to the checksum.
    mutating func add(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return }
        // ISA-L's length is 64-bit; its seed and result are the finished CRC, as zlib's are,
        // so pieces chain.
        value = crc32_gzip_refl(value, base.assumingMemoryBound(to: UInt8.self), UInt64(bytes.count))
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
