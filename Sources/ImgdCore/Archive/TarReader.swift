/// What a tar stream holds, as ``TarReader`` finds it.
public enum TarEvent {
    /// A member starts: its name (from the header, a pax `path` or a GNU long name), its size,
    /// and whether it is a regular file (symlinks, devices, folders are not: their names are
    /// reported so the caller can refuse them by name, and nothing of theirs is ever extracted).
    case member(name: String, size: Int, isRegularFile: Bool)
    /// Some of the current member's bytes, in order.
    case data(UnsafeRawBufferPointer)
    /// The current member's last byte has been passed on.
    case memberEnd
}

/// Why a tar stream was refused. Each case says where, so a user can tell a cut stream from a
/// damaged or hostile one.
public enum TarError: Error, Equatable, CustomStringConvertible {
    /// A header whose checksum does not match its bytes.
    case badChecksum(offset: Int)
    /// A header that is not ustar/GNU/pax, or a numeric field that is not a number.
    case malformedHeader(offset: Int, reason: String)
    /// A member larger than the limit the caller set.
    case memberTooLarge(name: String, size: Int, limit: Int)
    /// The stream ended inside a header or a member, or without the end-of-archive blocks.
    case truncated(offset: Int, reason: String)

    public var description: String {
        switch self {
        case .badChecksum(let offset): "the tar header at byte \(offset) has a bad checksum (damaged or not a tar stream)"
        case .malformedHeader(let offset, let reason): "the tar header at byte \(offset) is malformed: \(reason)"
        case .memberTooLarge(let name, let size, let limit):
            "the member \(EchoedText.cut(name)) is \(size) bytes, over the limit of \(limit) bytes (max-body-bytes)"
        case .truncated(let offset, let reason): "the tar stream is truncated at byte \(offset): \(reason)"
        }
    }
}

/// A streaming ustar reader: bytes go in as they arrive (``feed(_:_:)``), events come out;
/// nothing is buffered but one header block (and a pax or GNU long-name record of at most
/// ``maxExtendedHeaderBytes``). Nothing it reads ever names a file on this machine: callers match
/// members by name, they do not extract them.
public struct TarReader {
    /// The largest pax extended header or GNU long name accepted.
    public static let maxExtendedHeaderBytes = 64 * 1024

    /// The largest regular member accepted (bytes).
    public let maxMemberBytes: Int
    /// Bytes read so far (for messages).
    public private(set) var offset = 0

    private enum Phase {
        case header
        /// `left` bytes of a member, then `padding` zero bytes.
        case member(left: Int, padding: Int)
        /// An extended header (pax `x`/`g`, GNU `L`) being collected.
        case extended(kind: UInt8, left: Int, padding: Int)
        case padding(left: Int)
        /// After the first zero block: only zeros may follow.
        case ended
    }

    private var phase = Phase.header
    private var block: [UInt8] = []
    private var extended: [UInt8] = []
    /// Overrides from a pax header or GNU long name for the next member.
    private var nextName: String?
    private var nextSize: Int?

    public init(maxMemberBytes: Int) {
        self.maxMemberBytes = maxMemberBytes
    }

    /// Whether the end-of-archive block has been read.
    public var isEnded: Bool {
        if case .ended = phase { return true }
        return false
    }

    /// Reads `bytes`, calling `sink` for each event. Throws at the first malformed header
    /// (`TarError`) or whatever `sink` throws; the reader must not be fed after a throw.
    public mutating func feed(_ bytes: UnsafeRawBufferPointer, _ sink: (TarEvent) throws -> Void) throws {
        var index = 0
        while index < bytes.count {
            switch phase {
            case .header:
                let take = min(TarHeader.blockSize - block.count, bytes.count - index)
                block.append(contentsOf: bytes[index..<(index + take)])
                index += take
                offset += take
                if block.count == TarHeader.blockSize {
                    let header = block
                    block.removeAll(keepingCapacity: true)
                    try readHeader(header, at: offset - TarHeader.blockSize, sink)
                }
            case .member(let left, let padding):
                let take = min(left, bytes.count - index)
                if take > 0 {
                    try sink(.data(UnsafeRawBufferPointer(rebasing: bytes[index..<(index + take)])))
                    index += take
                    offset += take
                }
                if left - take == 0 {
                    try sink(.memberEnd)
                    phase = padding > 0 ? .padding(left: padding) : .header
                } else {
                    phase = .member(left: left - take, padding: padding)
                }
            case .extended(let kind, let left, let padding):
                let take = min(left, bytes.count - index)
                extended.append(contentsOf: bytes[index..<(index + take)])
                index += take
                offset += take
                if left - take == 0 {
                    try finishExtended(kind)
                    phase = padding > 0 ? .padding(left: padding) : .header
                } else {
                    phase = .extended(kind: kind, left: left - take, padding: padding)
                }
            case .padding(let left):
                let take = min(left, bytes.count - index)
                index += take
                offset += take
                phase = left - take == 0 ? .header : .padding(left: left - take)
            case .ended:
                // GNU tar pads the archive to a 10 KiB record with zeros; anything else is junk
                // after the end, which is ignored as tar itself does.
                offset += bytes.count - index
                return
            }
        }
    }

    /// The stream ended: throws unless it ended where an archive may (after a zero block).
    public func finish() throws(TarError) {
        switch phase {
        case .ended:
            return
        case .header where block.isEmpty:
            throw .truncated(offset: offset, reason: "no end-of-archive block (the sender stopped between members)")
        case .header:
            throw .truncated(offset: offset, reason: "inside a header")
        case .member, .padding, .extended:
            throw .truncated(offset: offset, reason: "inside a member")
        }
    }

    private mutating func readHeader(_ header: [UInt8], at start: Int, _ sink: (TarEvent) throws -> Void) throws {
        if header.allSatisfy({ $0 == 0 }) {
            phase = .ended
            return
        }
        guard let stored = Self.number(header[148..<156]) else {
            throw TarError.malformedHeader(offset: start, reason: "its checksum field is not a number")
        }
        var unsigned = 0
        var signed = 0
        for (position, byte) in header.enumerated() {
            let value = (148..<156).contains(position) ? UInt8(ascii: " ") : byte
            unsigned += Int(value)
            signed += Int(Int8(bitPattern: value))
        }
        guard stored == unsigned || stored == signed else { throw TarError.badChecksum(offset: start) }
        let magic = Array(header[257..<263])
        guard magic == Array("ustar".utf8) + [0] || magic == Array("ustar ".utf8) else {
            throw TarError.malformedHeader(offset: start, reason: "no ustar magic (a v7 or non-tar header)")
        }
        guard var size = Self.number(header[124..<136]) else {
            throw TarError.malformedHeader(offset: start, reason: "its size field is not a number")
        }
        let kind = header[156]
        if let override = nextSize, kind != UInt8(ascii: "x"), kind != UInt8(ascii: "g"), kind != UInt8(ascii: "L") {
            size = override
        }
        switch kind {
        case UInt8(ascii: "x"), UInt8(ascii: "g"), UInt8(ascii: "L"):
            guard size <= Self.maxExtendedHeaderBytes else {
                throw TarError.malformedHeader(offset: start, reason: "an extended header of \(size) bytes (at most \(Self.maxExtendedHeaderBytes))")
            }
            extended.removeAll(keepingCapacity: true)
            phase = .extended(kind: kind, left: size, padding: TarHeader.padding(after: size))
            if size == 0 { try finishExtended(kind); phase = .header }
            return
        default:
            break
        }
        var name = nextName ?? Self.text(header[0..<100])
        if nextName == nil, magic == Array("ustar".utf8) + [0] {
            let prefix = Self.text(header[345..<500])
            if !prefix.isEmpty { name = prefix + "/" + name }
        }
        nextName = nil
        nextSize = nil
        let isRegular = kind == UInt8(ascii: "0") || kind == 0 || kind == UInt8(ascii: "7")
        if isRegular, size > maxMemberBytes {
            throw TarError.memberTooLarge(name: name, size: size, limit: maxMemberBytes)
        }
        // Links, devices, folders and FIFOs store no data (their size field is not a length).
        let dataSize = isRegular || !Array("123456".utf8).contains(kind) ? size : 0
        if !isRegular, dataSize > maxMemberBytes {
            throw TarError.memberTooLarge(name: name, size: dataSize, limit: maxMemberBytes)
        }
        try sink(.member(name: name, size: dataSize, isRegularFile: isRegular))
        if dataSize == 0 {
            try sink(.memberEnd)
            phase = .header
        } else {
            phase = .member(left: dataSize, padding: TarHeader.padding(after: dataSize))
        }
    }

    /// A pax header's `path` and `size` records, or a GNU long name, for the next member.
    private mutating func finishExtended(_ kind: UInt8) throws(TarError) {
        defer { extended.removeAll(keepingCapacity: true) }
        if kind == UInt8(ascii: "L") {
            nextName = Self.text(extended[...])
            return
        }
        guard kind == UInt8(ascii: "x") else { return }  // global headers: nothing we use
        var rest = extended[...]
        while !rest.isEmpty {
            guard let space = rest.firstIndex(of: UInt8(ascii: " ")),
                let length = Int(String(decoding: rest[rest.startIndex..<space], as: UTF8.self)),
                length > space - rest.startIndex, length <= rest.count
            else {
                throw .malformedHeader(offset: offset, reason: "a pax record without a valid length")
            }
            let record = rest[(space + 1)..<(rest.startIndex + length)]
            rest = rest[(rest.startIndex + length)...]
            guard record.last == UInt8(ascii: "\n"), let equals = record.firstIndex(of: UInt8(ascii: "=")) else {
                throw .malformedHeader(offset: offset, reason: "a pax record that is not key=value")
            }
            let key = String(decoding: record[record.startIndex..<equals], as: UTF8.self)
            let value = String(decoding: record[(equals + 1)..<(record.endIndex - 1)], as: UTF8.self)
            switch key {
            case "path": nextName = value
            case "size":
                guard let size = Int(value), size >= 0 else {
                    throw .malformedHeader(offset: offset, reason: "a pax size that is not a number")
                }
                nextSize = size
            default: break
            }
        }
    }

    /// An octal field (NUL- or space-terminated, spaces before allowed), or GNU base-256 (high
    /// bit set); nil when it is neither.
    static func number(_ field: ArraySlice<UInt8>) -> Int? {
        guard let first = field.first else { return nil }
        if first & 0x80 != 0 {
            // Base-256: big-endian, the first byte's high bit a marker. Refuse what overflows Int.
            guard first == 0x80 else { return nil }
            var value = 0
            for byte in field.dropFirst() {
                guard value <= (Int.max >> 8) else { return nil }
                value = value << 8 | Int(byte)
            }
            return value
        }
        var value = 0
        var digits = 0
        var ended = false
        for byte in field {
            if byte == 0 || byte == UInt8(ascii: " ") {
                if digits > 0 { ended = true }
                continue
            }
            guard !ended, byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "7"), value <= (Int.max >> 3) else { return nil }
            value = value << 3 | Int(byte - UInt8(ascii: "0"))
            digits += 1
        }
        return value
    }

    /// A NUL-terminated text field.
    static func text(_ field: ArraySlice<UInt8>) -> String {
        let end = field.firstIndex(of: 0) ?? field.endIndex
        return String(decoding: field[field.startIndex..<end], as: UTF8.self)
    }
}
