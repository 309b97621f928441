/// A PNG's chunk walk made while its body arrives, so that validating a large body does not
/// read its file back.
///
/// Validating a PNG is the one check that must see every byte (each chunk's CRC-32). For a body
/// spilled to a file, ``ImageValidator/validate(_:walked:)`` used to read the whole file back
/// for it: a second pass over every byte, a copy out of the page cache each, after the body had
/// been hashed and written. The walk instead runs on the same pieces, in the same order, as they
/// are hashed and written, while they are still in the CPU's cache.
///
/// It is exactly the walk validation would make: the same ``PNGChunkStream``, made from the same
/// IHDR fields and the same body size, fed the same bytes front to back. Validation uses it only
/// when it saw every byte of a body of the size validated (the size the response declared, and
/// the body got); otherwise — an undeclared length, a body of another size — validation reads
/// the file as before. Header checks (signature, IHDR, the pixel limit) are made from the file's
/// head either way, before the walk's verdict, so a body gets the same verdict and the same
/// message whichever way it was walked.
public struct PNGArrivalWalk: Sendable {
    /// The size of the body the walk was made for.
    public let bodyCount: Int
    /// Body bytes fed so far.
    public private(set) var received = 0
    private var stream: PNGChunkStream
    /// What the walk found wrong, if anything; feeding then only counts bytes.
    private var failure: ImageValidationError?
    /// Set when the walk cannot vouch for the body (an error of another kind): validation then
    /// reads the file.
    private var isAbandoned = false

    /// A walk for a body of `bodyCount` bytes whose first bytes are `head`; nil unless `head`
    /// starts with PNG's signature and holds IHDR's fields (the stream needs its size and colour
    /// type). Feed it `head` first.
    public init?(head: UnsafeRawBufferPointer, bodyCount: Int) {
        guard head.count >= 33, case .format(.png) = ImageSignature.match(head) else { return nil }
        let width = Int(ImageByteOrder.bigEndian.decode(head[16..<20]))
        let height = Int(ImageByteOrder.bigEndian.decode(head[20..<24]))
        self.bodyCount = bodyCount
        stream = PNGChunkStream(bodyCount: bodyCount, start: 8, colourType: head[25], width: width, height: height)
    }

    /// Walks the next bytes of the body (the first call gets its first bytes, signature included).
    public mutating func feed(_ bytes: UnsafeRawBufferPointer) {
        defer { received += bytes.count }
        guard failure == nil, !isAbandoned, !stream.isFinished else { return }
        // The stream starts after the signature; from then on it is fed every byte in order.
        let skip = max(0, stream.position - received)
        guard skip < bytes.count else { return }
        do {
            try stream.feed(UnsafeRawBufferPointer(rebasing: bytes[skip...]))
        } catch let error as ImageValidationError {
            failure = error
        } catch {
            isAbandoned = true
        }
    }

    /// The walk of the whole of `body` fed in pieces of `pieceSize` bytes (the first at least the
    /// 33 a walk starts from), as a spill lane feeds one, made for a body of `declaredCount`
    /// bytes (by default `body`'s); nil when `body` is no PNG. For checks of the walk against a
    /// read of the body: the tests and the image fuzz target.
    public static func walking(_ body: UnsafeRawBufferPointer, pieceSize: Int, declaredCount: Int? = nil) -> PNGArrivalWalk? {
        let first = max(33, pieceSize)
        guard var walk = PNGArrivalWalk(head: UnsafeRawBufferPointer(rebasing: body.prefix(first)), bodyCount: declaredCount ?? body.count)
        else { return nil }
        var offset = 0
        while offset < body.count {
            let end = min(body.count, offset + (offset == 0 ? first : max(1, pieceSize)))
            walk.feed(UnsafeRawBufferPointer(rebasing: body[offset..<end]))
            offset = end
        }
        return walk
    }

    /// Whether the walk stands for the whole of a body of `count` bytes.
    func covers(_ count: Int) -> Bool {
        !isAbandoned && count == bodyCount && received == bodyCount
    }

    /// The walk's verdict, as validation's own walk would give it: its first failure, or the
    /// error for a body that ended before IEND.
    func verdict() throws {
        if let failure { throw failure }
        guard stream.isFinished else { throw stream.endedEarly }
    }
}
