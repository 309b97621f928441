import Foundation
import ImgdCore
import ImgdTestSupport
import Testing

@Suite("Failure codes", .offThePool)
struct FailureCodeTests {
    /// Protocol.md, read from the package's root.
    static let protocolDocument = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Protocol.md")

    /// The `snake_case` codes written in backquotes in Protocol.md's *Error codes* section.
    static func documentedCodes() throws -> [String] {
        let text = try String(contentsOf: protocolDocument, encoding: .utf8)
        let section = try #require(text.range(of: "\n## Error codes\n"))
        let rest = text[section.upperBound...]
        let body = rest.range(of: "\n## ").map { rest[..<$0.lowerBound] } ?? rest
        return body.split(separator: "`", omittingEmptySubsequences: false).enumerated()
            .filter { $0.offset % 2 == 1 }.map { String($0.element) }
            .filter { $0.allSatisfy { $0.isLowercase || $0 == "_" || $0 == "<" || $0 == ">" } }
    }

    @Test("Protocol.md's error code list names exactly the enum's cases, in order")
    func documentMatchesEnum() throws {
        let documented = try Self.documentedCodes()
        let expected = FailureCode.allCases.map { $0 == .http ? "http_<status>" : $0.rawValue }
        #expect(documented == expected)
    }

    @Test("an HTTP status failure carries its status")
    func httpStatus() {
        #expect(FailureCode.http(status: 404) == "http_404")
        #expect(FailureCode.http(status: 503) == "http_503")
    }
}
