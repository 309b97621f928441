import Foundation
import ImgdCore
import Testing

@Suite("Base64")
struct Base64Tests {
    @Test("RFC 4648's test vectors, with padding")
    func vectors() {
        let vectors = [
            ("", ""), ("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v"), ("foob", "Zm9vYg=="), ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ]
        for (plain, encoded) in vectors {
            #expect(Base64.encode(Array(plain.utf8)) == encoded)
            #expect(Base64.decode(encoded) == Array(plain.utf8))
        }
    }

    @Test("every length and byte value: the same text as Foundation's encoder, and decoded back whole")
    func sameAsFoundation() {
        var generator = SystemRandomNumberGenerator()
        for length in Array(0...70) + [4095, 4096, 65_537] {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let encoded = Base64.encode(bytes)
            #expect(encoded == Data(bytes).base64EncodedString(), "length \(length)")
            #expect(Base64.decode(encoded) == bytes, "length \(length)")
        }
        #expect(Base64.encode(Array(0...255)).utf8.count == 344)
        #expect(Base64.encode(Array(0...255)) == Data(Array(0...255)).base64EncodedString())
    }
}
