import CISAL

/// Inflates a gzip stream held in memory (a compressed sitemap) with ISA-L, never past a limit:
/// a small bomb that would inflate to gigabytes stops at `limit` bytes of output.
public enum GzipInflater {
    /// Why a stream could not be inflated.
    public enum Failure: Error, Sendable, Equatable, CustomStringConvertible {
        /// It inflates to more than the limit.
        case tooLarge(limit: Int)
        /// It is not a whole, valid gzip stream (ISA-L's code, or the end came early).
        case corrupt(String)

        public var description: String {
            switch self {
            case .tooLarge(let limit): "it inflates to more than \(limit) bytes"
            case .corrupt(let reason): "it is not a valid gzip stream: \(reason)"
            }
        }
    }

    /// Whether `bytes` start like a gzip stream (1F 8B).
    public static func isGzip(_ bytes: some Collection<UInt8>) -> Bool {
        bytes.starts(with: [0x1F, 0x8B])
    }

    /// The first gzip member of `input`, inflated, at most `limit` bytes (its checksum checked).
    public static func inflate(_ input: [UInt8], limit: Int) -> Result<[UInt8], Failure> {
        // ISA-L's state holds its Huffman tables and a 64 KiB window: on the heap, not the stack.
        let state = UnsafeMutablePointer<inflate_state>.allocate(capacity: 1)
        defer { state.deallocate() }
        isal_inflate_init(state)
        state.pointee.crc_flag = UInt32(ISAL_GZIP)
        var output: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        return input.withUnsafeBufferPointer { source -> Result<[UInt8], Failure> in
            state.pointee.next_in = UnsafeMutablePointer(mutating: source.baseAddress)
            state.pointee.avail_in = UInt32(source.count)
            while true {
                let (code, produced) = chunk.withUnsafeMutableBufferPointer { out in
                    state.pointee.next_out = out.baseAddress
                    state.pointee.avail_out = UInt32(out.count)
                    let code = isal_inflate(state)
                    return (code, out.count - Int(state.pointee.avail_out))
                }
                guard code == ISAL_DECOMP_OK else { return .failure(.corrupt("ISA-L inflate error \(code)")) }
                guard output.count + produced <= limit else { return .failure(.tooLarge(limit: limit)) }
                output.append(contentsOf: chunk[..<produced])
                if state.pointee.block_state == ISAL_BLOCK_FINISH { return .success(output) }
                if produced == 0, state.pointee.avail_in == 0 {
                    return .failure(.corrupt("the data ends before the stream does"))
                }
            }
        }
    }
}
