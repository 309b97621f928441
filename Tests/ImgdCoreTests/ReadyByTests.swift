import ImgdCore
import Testing

/// A list's deadline (`# ready-by:`, a JSON list's `ready_by`, `add`'s `ready_by`): the forms
/// read, the instant each becomes (a time of day: the next one, across midnight and DST), the
/// errors naming what is wrong; and the two ways a list carries it.
@Suite("Deadlines: ready-by parsed, resolved, carried by text and JSON lists", .offThePool)
struct ReadyByTests {
    typealias Zone = CalendarWindowTests.CentralEuropeLike

    static func utc(_ year: Int, _ month: Int, _ day: Int, _ hour: Int, _ minute: Int = 0, _ second: Int = 0) -> Int64 {
        CalendarWindowTests.utc(year, month, day, hour, minute, second) * 1000
    }

    @Test("instants with a zone: Z, an offset, a fraction kept to the millisecond, lower-case t and z")
    func instants() throws {
        let expected = Self.utc(2026, 12, 7, 5, 30)
        #expect(try ReadyBy(parsing: "2026-12-07T05:30:00Z") == .instant(milliseconds: expected))
        #expect(try ReadyBy(parsing: " 2026-12-07T05:30Z\t") == .instant(milliseconds: expected))
        #expect(try ReadyBy(parsing: "2026-12-07T06:30:00+01:00") == .instant(milliseconds: expected))
        #expect(try ReadyBy(parsing: "2026-12-07T00:00:00-05:30") == .instant(milliseconds: expected))
        #expect(try ReadyBy(parsing: "2026-12-07t05:30:00.250z") == .instant(milliseconds: expected + 250))
        #expect(try ReadyBy(parsing: "2026-12-07T05:30:00.5Z") == .instant(milliseconds: expected + 500))
        // An instant is the same whatever the zone or the claim's time.
        #expect(try ReadyBy(parsing: "2026-12-07T05:30:00Z").deadline(afterMilliseconds: 0, in: Zone()) == expected)
        #expect(try ReadyBy(parsing: "2026-12-07T05:30:00Z").description == "2026-12-07T05:30:00Z")
    }

    @Test("a date and time without a zone is local; in a skipped hour it is the change, in a repeated hour its first occurrence")
    func localDateTimes() throws {
        let winter = try ReadyBy(parsing: "2026-12-07T05:30")
        #expect(winter == .localDateTime(CivilDate(year: 2026, month: 12, day: 7), second: 5 * 3600 + 1800, milliseconds: 0))
        #expect(winter.deadline(afterMilliseconds: 0, in: Zone()) == Self.utc(2026, 12, 7, 4, 30))  // UTC+1
        #expect(try ReadyBy(parsing: "2026-07-01T12:00:00").deadline(afterMilliseconds: 0, in: Zone()) == Self.utc(2026, 7, 1, 10))  // UTC+2
        // 02:30 does not happen on 2026-03-29: the clocks jump at 01:00 UTC.
        #expect(try ReadyBy(parsing: "2026-03-29T02:30").deadline(afterMilliseconds: 0, in: Zone()) == Zone.springForward * 1000)
        // 02:30 happens twice on 2026-10-25: the first (UTC+2) counts.
        #expect(try ReadyBy(parsing: "2026-10-25T02:30").deadline(afterMilliseconds: 0, in: Zone()) == Self.utc(2026, 10, 25, 0, 30))
    }

    @Test("a time of day is the next one after the claim: later today, else tomorrow; across midnight and DST")
    func timesOfDay() throws {
        let fiveThirty = try ReadyBy(parsing: "05:30")
        #expect(fiveThirty == .timeOfDay(second: 5 * 3600 + 1800))
        #expect(try ReadyBy(parsing: "23:59:59") == .timeOfDay(second: 86_399))
        let zone = FixedOffsetZone(seconds: 0)
        // Claimed at 03:00: today's 05:30. At 05:30 exactly or later: tomorrow's.
        #expect(fiveThirty.deadline(afterMilliseconds: Self.utc(2026, 12, 7, 3), in: zone) == Self.utc(2026, 12, 7, 5, 30))
        #expect(fiveThirty.deadline(afterMilliseconds: Self.utc(2026, 12, 7, 5, 30), in: zone) == Self.utc(2026, 12, 8, 5, 30))
        #expect(fiveThirty.deadline(afterMilliseconds: Self.utc(2026, 12, 7, 22), in: zone) == Self.utc(2026, 12, 8, 5, 30))
        // Claimed at 23:00 on the eve of the spring change, local UTC+1: 05:30 local is UTC+2 by then.
        #expect(fiveThirty.deadline(afterMilliseconds: Self.utc(2026, 3, 28, 22), in: Zone()) == Self.utc(2026, 3, 29, 3, 30))
        // Claimed at 02:10 local (UTC+2, before the fall change), 02:30 is 20 minutes away.
        #expect(try ReadyBy(parsing: "02:30").deadline(afterMilliseconds: Self.utc(2026, 10, 25, 0, 10), in: Zone()) == Self.utc(2026, 10, 25, 0, 30))
    }

    @Test(
        "bad deadlines are refused naming the text and what is wrong",
        arguments: [
            ("", "it is empty"),
            ("tomorrow", "a time of day is HH:MM"),
            ("25:00", "a time of day is HH:MM"),
            ("24:00", "a time of day is HH:MM"),
            ("5:30", "a time of day is HH:MM"),
            ("2026-13-01T00:00Z", "there is no day 1 in month 13"),
            ("2026-02-29T00:00Z", "there is no day 29 in month 2 of 2026"),
            ("2026-12-07T24:00Z", "from 00:00:00 to 23:59:59"),
            ("2026-12-07T05:30:00+0100", "+HH:MM"),
            ("2026-12-07T05:30:00Z junk", "after the zone"),
            ("2026-12-07 05:30", "an instant is written"),
            ("2026-12-07T05:30:00.Z", "an instant is written"),
            (String(repeating: "9", count: 100), "longer than 64"),
            ("1969-12-31T23:59:59Z", "the year 1969 is before 1970"),
        ])
    func refused(text: String, reason: String) {
        #expect {
            _ = try ReadyBy(parsing: text)
        } throws: { error in
            let message = "\(error)"
            return message.contains(reason) && message.contains("is not a deadline")
        }
    }

    @Test("a text list's '# ready-by:' header sets the deadline; a bad one is malformed at its line; after the first URL it is a comment")
    func textHeader() throws {
        let good = try LinkListFixture.read("# pin: 1h\n# Ready-By: 2026-12-07T05:30:00Z\nhttp://a.example/1.png\n# ready-by: 06:00\n", fileExtension: "txt")
        #expect(good.error == nil && good.entries.count == 1)
        #expect(good.readyBy == .instant(milliseconds: Self.utc(2026, 12, 7, 5, 30)))
        #expect(good.pin == .seconds(3600))
        let bad = try LinkListFixture.read("# ready-by: next tuesday\nhttp://a.example/1.png\n", fileExtension: "txt")
        #expect(bad.entries.isEmpty)
        #expect(bad.malformed?.line == 1)
        #expect(bad.malformed?.reason.contains("bad '# ready-by:' header: 'next tuesday' is not a deadline") == true, "\(String(describing: bad.error))")
        #expect(try LinkListFixture.read("http://a.example/1.png\n", fileExtension: "txt").readyBy == nil)
    }

    @Test("a JSON list's wrapper object: ready_by before or after urls; the array form stays valid")
    func jsonWrapper() throws {
        let expected = ReadyBy.instant(milliseconds: Self.utc(2026, 12, 7, 5, 30))
        let before = try LinkListFixture.read(
            #"{"ready_by": "2026-12-07T05:30:00Z", "urls": ["http://a.example/1.png", {"url": "http://a.example/2.png", "pin": "1h"}]}"#,
            fileExtension: "json")
        #expect(before.error == nil && before.entries.count == 2 && before.readyBy == expected)
        #expect(before.entries[1].options.pin == .seconds(3600))
        let after = try LinkListFixture.read("{\n \"urls\": [\"http://a.example/1.png\"],\n \"ready_by\": \"05:30\"\n}\n", fileExtension: "json")
        #expect(after.error == nil && after.entries.count == 1 && after.readyBy == .timeOfDay(second: 19_800))
        let noDeadline = try LinkListFixture.read(#"{"urls": []}"#, fileExtension: "json")
        #expect(noDeadline.error == nil && noDeadline.entries.isEmpty && noDeadline.readyBy == nil)
        #expect(try LinkListFixture.read(#"["http://a.example/1.png"]"#, fileExtension: "json").entries.count == 1)
        // Cut at every read size, it reads the same.
        for size in [1, 2, 3, 7, 16] {
            let cut = try LinkListFixture.read(
                #"{"ready_by":"2026-12-07T05:30:00Z","urls":["http://a.example/1.png"]}"#, fileExtension: "json", chunkSize: max(size, 8))
            #expect(cut.error == nil && cut.entries.count == 1 && cut.readyBy == expected)
        }
    }

    @Test(
        "a bad wrapper object is malformed, naming what is wrong; URLs before the fault are kept",
        arguments: [
            (#"{"ready_by": "soon", "urls": []}"#, "bad ready_by: 'soon' is not a deadline", 0),
            (#"{"urls": ["http://a.example/1.png"], "ready_by": "soon"}"#, "bad ready_by", 1),
            (#"{"ready_by": 5, "urls": []}"#, "bad ready_by: not a string", 0),
            (#"{"readyBy": "05:30", "urls": []}"#, "unknown member \"readyBy\" in the list's object", 0),
            (#"{"ready_by": "05:30"}"#, "has no \"urls\" array", 0),
            (#"{}"#, "the list's object is empty", 0),
            (#"{"urls": "http://a.example/1.png"}"#, "\"urls\" must be an array", 0),
            (#"{"urls": [], "urls": []}"#, "\"urls\" twice", 0),
            (#"{"ready_by": "05:30", "ready_by": "06:30", "urls": []}"#, "\"ready_by\" twice", 0),
            (#"{"urls": []} []"#, "after the end of the list's object", 0),
            (#"{"urls": [] "ready_by": "05:30"}"#, "expected ',' or '}' in the list's object", 0),
        ])
    func badWrapper(json: String, reason: String, kept: Int) throws {
        let outcome = try LinkListFixture.read(json, fileExtension: "json")
        #expect(outcome.malformed?.reason.contains(reason) == true, "\(String(describing: outcome.error))")
        #expect(outcome.entries.count == kept)
    }
}
