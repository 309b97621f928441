import ImgdCore
import Testing

@testable import ImgctlCLI

/// imgctl's digest of a reply's bytes (OpenSSL's direct SHA-256) is the daemon's (EVP's).
@Suite struct ReplyDigestTests {
    @Test("the FIPS 180-4 examples, and the daemon's digest at every length around the block boundaries")
    func sameAsTheDaemons() {
        #expect(ReplyDigest.hex(of: []) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(ReplyDigest.hex(of: Array("abc".utf8)) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        for length in Array(0...130) + [1000, 65_537, 1_000_000] {
            let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
            #expect(ReplyDigest.hex(of: bytes) == SHA256Digest(of: bytes).hex, "length \(length)")
        }
    }
}
