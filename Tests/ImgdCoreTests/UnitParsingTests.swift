import ImgdCore
import ImgdTestSupport
import Testing

@Suite("Sizes and durations", .offThePool)
struct UnitParsingTests {
    static let goodSizes: [(String, Int)] = [
            ("12345", 12345),
            ("0", 0),
            ("900B", 900),
            ("10KB", 10_000),
            ("500MB", 500_000_000),
            ("2 GB", 2_000_000_000),
            ("1TB", 1_000_000_000_000),
            ("1KiB", 1024),
            ("64 MiB", 64 << 20),
            ("1GiB", 1 << 30),
            ("3TiB", 3 << 40),
            ("1gib", 1 << 30),
            ("64mib", 64 << 20),
            ("10kb", 10_000),
            ("1.5GiB", 3 << 29),
            ("0.5 KB", 500),
            ("0.1KiB", 102),  // 102.4, rounded down to a whole byte
            ("  64 MiB\n", 64 << 20),
            ("9223372036854775807", Int.max),
        ]

    @Test(
        "sizes: binary units are powers of 1024, decimal ones of 1000, any case, space optional",
        arguments: goodSizes)
    func sizes(text: String, bytes: Int) throws {
        #expect(try ByteCount(parsing: text) == ByteCount(bytes))
    }

    @Test(
        "sizes: anything else is an error that quotes the text and lists the units",
        arguments: ["", "   ", "12q", "MiB", "1.5.0GiB", "1.GiB", ".5GiB", "1e3", "1 2MiB", "1 MiB extra", "0x10", "1,5GiB", "1KiBs", "１MiB"])
    func badSizes(text: String) {
        #expect(throws: UnitParseError(
            text: text,
            expected: "a number with an optional unit (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)",
            kind: .size)
        ) {
            try ByteCount(parsing: text)
        }
    }

    @Test("the message says what was wrong, for the person who wrote it")
    func messages() throws {
        let unknown = #expect(throws: UnitParseError.self) { try ByteCount(parsing: "12q") }
        #expect(unknown?.description == "'12q' is not a size: expected a number with an optional unit (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)")
        let negative = #expect(throws: UnitParseError.self) { try ByteCount(parsing: "-5MB") }
        #expect(negative?.description == "'-5MB' is not a size: expected a number without a sign, with an optional unit (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)")
        let fraction = #expect(throws: UnitParseError.self) { try ByteCount(parsing: "1.5") }
        #expect(fraction?.description == "'1.5' is not a size: expected a whole number of bytes (a fraction needs a unit such as KiB or MB)")
        let duration = #expect(throws: UnitParseError.self) { try Duration.parsing("5 fortnights") }
        #expect(duration?.description == "'5 fortnights' is not a duration: expected a number with an optional unit (ms, s, m, h, d, w; seconds when none)")
    }

    @Test("sizes past Int.max bytes overflow into an error, not a wrap-around", arguments: [
        "9223372036854775808", "8388608TiB", "9300000TB", "99999999999999999999999GiB", "8388608.00001TiB",
    ])
    func sizeOverflow(text: String) throws {
        #expect(throws: UnitParseError(text: text, expected: "at most 9223372036854775807 bytes (8 EiB)", kind: .size)) {
            try ByteCount(parsing: text)
        }
        #expect(try ByteCount(parsing: "8388607TiB") == ByteCount(8_388_607 << 40))
    }

    @Test("a size text has a length limit")
    func sizeLength() throws {
        let long = String(repeating: "0", count: 65) + "1"
        #expect(throws: UnitParseError(text: long, expected: "at most 64 characters", kind: .size)) {
            try ByteCount(parsing: long)
        }
        #expect(try ByteCount(parsing: String(repeating: "0", count: 63) + "1") == 1)
    }

    static let printedSizes: [(Int, String)] = [
            (0, "0 B"), (900, "900 B"), (1023, "1023 B"), (1024, "1 KiB"), (1536, "1.5 KiB"),
            (64 << 20, "64 MiB"), (1 << 30, "1 GiB"), (3 << 29, "1.5 GiB"), (5 << 40, "5 TiB"),
            (1 << 50, "1024 TiB"),  // TiB is the largest unit that parses back
            (1_048_535, "1 MiB"),  // 1023.96 KiB rounds up into the next unit
            (1_100_000, "1 MiB"), (1_200_000, "1.1 MiB"), (-2048, "-2 KiB"), (Int.max, "8388608 TiB"),
        ]

    @Test("sizes print in binary units with at most one decimal", arguments: printedSizes)
    func printing(bytes: Int, text: String) {
        #expect(ByteCount(bytes).description == text)
    }

    @Test("a printed size reads back to the same value when it is exact")
    func roundTrip() throws {
        for bytes in [0, 512, 1024, 1536, 64 << 20, 3 << 29, 7 << 40] {
            #expect(try ByteCount(parsing: ByteCount(bytes).description).bytes == bytes)
        }
    }

    @Test("sizes compare by their bytes and are written as integer literals")
    func comparison() {
        let small: ByteCount = 10
        #expect(small < ByteCount(11))
        #expect([ByteCount(3), 1, 2].sorted() == [1, 2, 3])
    }

    static let goodDurations: [(String, Duration)] = [
            ("30m", .seconds(1800)),
            ("12h", .seconds(12 * 3600)),
            ("7d", .seconds(7 * 86_400)),
            ("90s", .seconds(90)),
            ("500ms", .milliseconds(500)),
            ("1w", .seconds(7 * 86_400)),
            ("45", .seconds(45)),
            ("0", .zero),
            ("1.5h", .seconds(5400)),
            ("0.25", .milliseconds(250)),
            ("2 H", .seconds(7200)),
            ("250MS", .milliseconds(250)),
            (" 10 s ", .seconds(10)),
        ]

    @Test("durations: ms, s, m, h, d, w; a bare number is seconds", arguments: goodDurations)
    func durations(text: String, expected: Duration) throws {
        #expect(try Duration.parsing(text) == expected)
    }

    static let badDurationTexts: [(String, String)] = [
            ("", "a number with an optional unit (ms, s, m, h, d, w; seconds when none)"),
            ("m", "a number with an optional unit (ms, s, m, h, d, w; seconds when none)"),
            ("10y", "a number with an optional unit (ms, s, m, h, d, w; seconds when none)"),
            ("1h30m", "a number with an optional unit (ms, s, m, h, d, w; seconds when none)"),
            ("-5s", "a number without a sign, with an optional unit (ms, s, m, h, d, w; seconds when none)"),
            ("+5s", "a number without a sign, with an optional unit (ms, s, m, h, d, w; seconds when none)"),
            ("106752d", "at most 106751d (292 years)"),
            ("9223372037", "at most 106751d (292 years)"),
            ("99999999999999999999999w", "at most 106751d (292 years)"),
        ]

    @Test("durations: empty, negative, unknown units and overflow are errors", arguments: badDurationTexts)
    func badDurations(text: String, expected: String) {
        #expect(throws: UnitParseError(text: text, expected: expected, kind: .duration)) {
            try Duration.parsing(text)
        }
    }

    @Test("a duration text has a length limit")
    func durationLength() throws {
        let long = String(repeating: "0", count: 64) + "s"
        #expect(throws: UnitParseError(text: long, expected: "at most 64 characters", kind: .duration)) {
            try Duration.parsing(long)
        }
        #expect(try Duration.parsing(String(repeating: "0", count: 62) + "5s") == .seconds(5))
    }

    @Test("the largest duration is Int64.max nanoseconds")
    func durationLimit() throws {
        #expect(try Duration.parsing("106751d") == .seconds(106_751 * 86_400))
        #expect(try Duration.parsing("9223372036.854775807") == Duration.parsingLimit)
    }
}
