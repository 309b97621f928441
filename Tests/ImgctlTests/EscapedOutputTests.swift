import ImgdProtocol
import ImgdTestSupport
import Testing

@testable import ImgctlCLI

/// What `imgctl` prints for people never carries a control character from the daemon's text:
/// names, URLs and messages are written by whoever drops a list or talks to the socket.
@Suite("Escaped output", .offThePool)
struct EscapedOutputTests {
    /// No C0 control but the line's own layout, no DEL, no C1.
    static func isClean(_ text: String) -> Bool {
        !text.unicodeScalars.contains { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) }
    }

    @Test("table cells: ESC, newline, C1 and backslash escaped; columns measured after escaping")
    func tableCells() {
        var table = TableRenderer(header: ["NAME", "URL"])
        table.append(["evil\n<0>imgd: FAKE EMERGENCY", "http://a/\u{1B}[2J\u{9B}x\\y"])
        table.append(["b", "-"])
        let lines = table.lines()
        #expect(lines.count == 3)
        #expect(lines.allSatisfy(Self.isClean))
        #expect(lines[1] == #"evil\n<0>imgd: FAKE EMERGENCY  http://a/\x1b[2J\u009bx\\y"#)
        #expect(lines[2] == "b" + String(repeating: " ", count: 28) + "  -")
    }

    @Test("events: strings with DEL or C1 are quoted and escaped, in arrays too")
    func events() {
        let event = ControlEvent(
            name: "failed", seq: 3,
            data: .object([
                "url": .string("http://a/\u{1B}]0;owned\u{7}"), "name": .string("x\u{85}y\u{7F}"),
                "list": .array([.string("\u{9B}31m")]),
            ]), raw: "")
        let line = EventFormatter.line(event)
        #expect(Self.isClean(line))
        #expect(line == #"3 failed list=["\u009b31m"] name="x\u0085y\u007f" url="http://a/\u001b]0;owned\u0007""#)
    }

    @Test("the daemon's error message is escaped in imgctl's own error line")
    func errorMessage() {
        let error = ImgctlError.daemon(code: "not_found", message: "no list named \u{1B}[31mred\nline")
        #expect(error.message == #"imgctl: not_found: no list named \x1b[31mred\nline"#)
    }

    @Test("status: the spool path and degraded messages escaped")
    func status() throws {
        let status = JSONValue.object([
            "spool": .string("/s\u{1B}[2J"), "degraded": .array([.object(["code": .string("x"), "message": .string("a\rb")])]),
        ])
        let lines = StatusCommand.lines(status)
        #expect(lines.allSatisfy(Self.isClean))
        #expect(lines.contains(#"spool: /s\x1b[2J"#))
        #expect(lines.contains(#"degraded: x: a\rb"#))
    }
}
