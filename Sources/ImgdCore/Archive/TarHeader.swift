/// POSIX ustar headers (512-byte blocks), written and read by hand: the format is small, and
/// libarchive would add a C dependency to the daemon for a few hundred lines of it. The warm
/// set's archives (`imgctl export`/`import`) use it; GNU `tar -tf` lists what it writes.
public enum TarHeader {
    /// A tar block.
    public static let blockSize = 512

    /// The header of a regular file `name` (at most 100 bytes of ASCII) of `size` bytes,
    /// modified at `modified` (seconds since 1970): mode 0644, owner 0, `ustar\0` `00`.
    public static func regularFile(name: String, size: Int, modified: Int) -> [UInt8] {
        var block = [UInt8](repeating: 0, count: blockSize)
        let nameBytes = Array(name.utf8.prefix(100))
        block.replaceSubrange(0..<nameBytes.count, with: nameBytes)
        put(octal: 0o644, width: 8, at: 100, in: &block)
        put(octal: 0, width: 8, at: 108, in: &block)
        put(octal: 0, width: 8, at: 116, in: &block)
        put(octal: size, width: 12, at: 124, in: &block)
        put(octal: max(0, modified), width: 12, at: 136, in: &block)
        block[156] = UInt8(ascii: "0")
        block.replaceSubrange(257..<263, with: Array("ustar".utf8) + [0])
        block.replaceSubrange(263..<265, with: Array("00".utf8))
        let owner = Array("imgd".utf8)
        block.replaceSubrange(265..<(265 + owner.count), with: owner)
        block.replaceSubrange(297..<(297 + owner.count), with: owner)
        // The checksum is computed with its own field as spaces, then written as 6 digits, NUL, space.
        for index in 148..<156 { block[index] = UInt8(ascii: " ") }
        let sum = block.reduce(0) { $0 + Int($1) }
        put(octal: sum, width: 7, at: 148, in: &block)
        block[155] = UInt8(ascii: " ")
        return block
    }

    /// Zero bytes that pad a member of `size` bytes to a whole block.
    public static func padding(after size: Int) -> Int {
        (blockSize - size % blockSize) % blockSize
    }

    /// The end of an archive: two zero blocks.
    public static let endOfArchive = [UInt8](repeating: 0, count: 2 * blockSize)

    /// Writes `value` as zero-padded octal digits followed by a NUL, in `width` bytes; a value
    /// too large for them (a size of 8 GiB or more) in GNU's base-256 form, which GNU tar and
    /// ``TarReader`` read.
    private static func put(octal value: Int, width: Int, at offset: Int, in block: inout [UInt8]) {
        if value >= 1 << (3 * (width - 1)) {
            var rest = value
            for index in stride(from: offset + width - 1, to: offset, by: -1) {
                block[index] = UInt8(rest & 0xff)
                rest >>= 8
            }
            block[offset] = 0x80
            return
        }
        var digits = Array(String(value, radix: 8).utf8)
        let room = width - 1
        if digits.count < room { digits = [UInt8](repeating: UInt8(ascii: "0"), count: room - digits.count) + digits }
        block.replaceSubrange(offset..<(offset + room), with: digits.suffix(room))
        block[offset + room] = 0
    }
}
