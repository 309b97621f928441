import Foundation
import ImgdCore
import ImgdTestSupport
import Testing

@Suite("Base64", .offThePool)
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

    @Test("long texts decode as short ones do: whitespace skipped, a bad byte or bad last group refused anywhere")
    func longTexts() {
        let bytes = Array("some 150000 2000000, then more bytes to make several groups".utf8)
        let encoded = Base64.encode(bytes)
        #expect(encoded.utf8.count % 4 == 0 && encoded.utf8.count > 8)
        #expect(Base64.decode(String(encoded.prefix(12)) + "\n" + String(encoded.dropFirst(12))) == bytes)
        #expect(Base64.decode(String(encoded.prefix(12)) + "-" + String(encoded.dropFirst(13))) == nil)
        #expect(Base64.decode("Zm9vYmFy" + "c2==") == nil)  // leftover bits not zero, in the last group
        #expect(Base64.decode("Zm9vYmFy" + "Zg==") == Array("foobarf".utf8))
        #expect(Base64.decode("Zm9vYmFyZg") == Array("foobarf".utf8))  // padding optional, as before
        #expect(Base64.decode("Zm9=YmFyZm9v") == nil)  // data after padding
    }
}
