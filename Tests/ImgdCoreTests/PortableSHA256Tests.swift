import ImgdCore
import ImgdTestSupport
import Testing

@Suite("Plain-Swift SHA-256 (imgctl's)", .offThePool)
struct PortableSHA256Tests {
    @Test("FIPS 180-4's examples: empty, \"abc\", the two-block message, a million a's")
    func vectors() {
        #expect(PortableSHA256.hex(of: []) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(PortableSHA256.hex(of: Array("abc".utf8)) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(
            PortableSHA256.hex(of: Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8))
                == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        #expect(
            PortableSHA256.hex(of: [UInt8](repeating: 0x61, count: 1_000_000))
                == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    @Test("every length around the padding's block boundaries and random bytes: OpenSSL's digest")
    func sameAsOpenSSL() {
        var generator = SystemRandomNumberGenerator()
        for length in Array(0...200) + [447, 448, 511, 512, 513, 4095, 4096, 65_537, 1 << 20] {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            #expect(PortableSHA256.digest(of: bytes) == SHA256Digest(of: bytes).bytes, "length \(length)")
            #expect(PortableSHA256.hex(of: bytes) == SHA256Digest(of: bytes).hex, "length \(length)")
        }
    }
}
