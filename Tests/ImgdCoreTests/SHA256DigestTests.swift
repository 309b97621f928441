import Testing

@testable import ImgdCore

/// The daemon's SHA-256 (OpenSSL's direct functions): the FIPS 180-4 examples, and a body hashed
/// in pieces of any size (as a spill lane hashes it) gives the one-shot digest.
@Suite struct SHA256DigestTests {
    @Test("the FIPS 180-4 examples")
    func knownDigests() {
        #expect(SHA256Digest(of: [UInt8]()).hex == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(SHA256Digest(of: Array("abc".utf8)).hex == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(
            SHA256Digest(of: Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8)).hex
                == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        #expect(
            SHA256Digest(of: [UInt8](repeating: 0x61, count: 1_000_000)).hex
                == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    @Test("pieces of any size give the one-shot digest, and finish starts the hasher over", arguments: [1, 7, 63, 64, 65, 4096, 65_536])
    func piecesGiveTheSameDigest(pieceSize: Int) {
        let body = (0..<200_003).map { UInt8(truncatingIfNeeded: $0 &* 131 &+ 17) }
        var hasher = SHA256Hasher()
        body.withUnsafeBytes { all in
            var offset = 0
            while offset < all.count {
                let end = min(all.count, offset + pieceSize)
                hasher.update(UnsafeRawBufferPointer(rebasing: all[offset..<end]))
                offset = end
            }
        }
        #expect(hasher.finish() == SHA256Digest(of: body))
        #expect(hasher.finish() == SHA256Digest(of: [UInt8]()))
    }
}
