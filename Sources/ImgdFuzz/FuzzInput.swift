/// The fuzzer's bytes, split into a payload and the parameters of a run (chunk sizes, limits).
///
/// Parameters are taken from the end, as LLVM's `FuzzedDataProvider` does, so the front of an
/// input stays the document under test and a seed file written by hand (a real link list, a
/// real image) is read mostly as itself.
struct FuzzInput {
    private let bytes: UnsafeRawBufferPointer
    /// One past the last byte not yet taken as a parameter.
    private var end: Int

    init(_ bytes: UnsafeRawBufferPointer) {
        self.bytes = bytes
        self.end = bytes.count
    }

    /// The next parameter byte from the end, or 0 when the input is used up.
    mutating func byte() -> UInt8 {
        guard end > 0 else { return 0 }
        end -= 1
        return bytes[end]
    }

    /// A 16-bit parameter.
    mutating func uint16() -> Int {
        Int(byte()) << 8 | Int(byte())
    }

    /// One of `choices`, picked by the next parameter byte.
    mutating func pick<T>(_ choices: [T]) -> T {
        choices[Int(byte()) % choices.count]
    }

    /// What is left, the payload.
    var payload: [UInt8] { Array(bytes[0..<end]) }
}
