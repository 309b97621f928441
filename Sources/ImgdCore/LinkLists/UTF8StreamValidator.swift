/// Checks UTF-8 one byte at a time, so a file read in chunks can be validated without holding
/// a whole string: a character split across two reads is still checked as one.
///
/// It follows the table of well-formed sequences in the Unicode standard (§3.9, table 3-7):
/// no overlong forms, no surrogates, nothing above U+10FFFF.
struct UTF8StreamValidator {
    /// Continuation bytes still expected for the current character.
    private var remaining = 0
    /// The range the next continuation byte must fall in (narrower right after some lead bytes).
    private var lower: UInt8 = 0x80
    private var upper: UInt8 = 0xBF

    /// True between the lead byte of a multi-byte character and its last byte.
    var isInsideCharacter: Bool { remaining > 0 }

    /// Takes the next byte; false when it cannot continue a well-formed UTF-8 text.
    mutating func accept(_ byte: UInt8) -> Bool {
        if remaining > 0 {
            guard byte >= lower, byte <= upper else { return false }
            remaining -= 1
            lower = 0x80
            upper = 0xBF
            return true
        }
        switch byte {
        case 0x00...0x7F: return true
        case 0xC2...0xDF: expect(1, 0x80, 0xBF)
        case 0xE0: expect(2, 0xA0, 0xBF)
        case 0xE1...0xEC, 0xEE...0xEF: expect(2, 0x80, 0xBF)
        case 0xED: expect(2, 0x80, 0x9F)
        case 0xF0: expect(3, 0x90, 0xBF)
        case 0xF1...0xF3: expect(3, 0x80, 0xBF)
        case 0xF4: expect(3, 0x80, 0x8F)
        default: return false
        }
        return true
    }

    private mutating func expect(_ count: Int, _ lower: UInt8, _ upper: UInt8) {
        remaining = count
        self.lower = lower
        self.upper = upper
    }
}
