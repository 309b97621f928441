@testable import ImgctlCLI
import ImgdProtocol
import Testing

/// `imgctl status`'s lines for the calendar window and the courtesy loop.
@Suite("imgctl status: window and courtesy lines")
struct StatusWindowLineTests {
    @Test("a window in force shows its name, the time to its close and the caps; none shows the next opening")
    func windowLine() {
        let now = 1_800_000_000.0
        let open: JSONValue = [
            "name": "night", "current": ["name": "night", "opens_at": 1_799_990_000_000, "closes_at": 1_800_003_600_000],
            "next": .null, "max_parallel": 32, "max_rate": .null,
        ]
        #expect(HumanFormat.fromNow(milliseconds: 1_800_003_600_000, now: now) == "in 1h")
        #expect(StatusCommand.window(open).hasPrefix("window: night, closes in "))
        #expect(StatusCommand.window(open).hasSuffix("(max-parallel 32)"))
        let closed: JSONValue = [
            "name": .null, "current": .null, "next": ["name": "night", "opens_at": 1_800_007_200_000, "closes_at": 1_800_010_000_000],
            "max_parallel": 8, "max_rate": 1_048_576,
        ]
        let line = StatusCommand.window(closed)
        #expect(line.hasPrefix("window: none (max-parallel 8, max-rate 1 MiB/s); night opens in "), "\(line)")
        #expect(StatusCommand.window(["name": .null, "current": .null, "next": .null, "max_parallel": 8, "max_rate": .null]) == "window: none (max-parallel 8)")
    }

    @Test("the status lines end with the window and the courtesy loop's reason")
    func lines() {
        let status: JSONValue = [
            "window": ["name": .null, "current": .null, "next": .null, "max_parallel": 8, "max_rate": .null],
            "courtesy": ["reason": "stall share 34% against a threshold of 20%: prefetching 4 at once of 8"],
        ]
        let lines = StatusCommand.lines(status)
        #expect(lines.suffix(2) == ["window: none (max-parallel 8)", "courtesy: stall share 34% against a threshold of 20%: prefetching 4 at once of 8"])
    }
}
