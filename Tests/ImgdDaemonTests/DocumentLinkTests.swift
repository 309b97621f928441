import Foundation
import Testing

/// The documents a newcomer reads link to each other: every relative link in README.md,
/// docs/*.md, ARCHITECTURE.md and Protocol.md names a file that exists, and a `#anchor` names a
/// heading of that file (as GitHub makes anchors from headings).
@Suite("Documents: relative links and their anchors resolve")
struct DocumentLinkTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The documents checked, relative to the root.
    static func documents() throws -> [String] {
        let docs = try FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("docs").path)
            .filter { $0.hasSuffix(".md") }.sorted().map { "docs/" + $0 }
        return ["README.md", "ARCHITECTURE.md", "Protocol.md"] + docs
    }

    /// The targets of `[text](target)` links outside fenced code blocks and code spans.
    static func links(in text: String) -> [String] {
        var found: [String] = []
        var fenced = false
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.trimmingCharacters(in: .whitespaces).hasPrefix("```") { fenced.toggle(); continue }
            if fenced { continue }
            // Code spans first: `[host."X"](…)` inside backticks is not a link.
            let prose = line.split(separator: "`", omittingEmptySubsequences: false).enumerated()
                .filter { $0.offset % 2 == 0 }.map(\.element).joined(separator: " ")
            var rest = Substring(prose)
            while let close = rest.range(of: "](") {
                let after = rest[close.upperBound...]
                guard let end = after.firstIndex(of: ")") else { break }
                found.append(String(after[..<end]))
                rest = after[end...]
            }
        }
        return found
    }

    /// GitHub's anchors for the headings of `text`: lower-cased, punctuation dropped, spaces as
    /// hyphens, a repeated one numbered (`-1`, `-2`).
    static func anchors(in text: String) -> Set<String> {
        var seen: [String: Int] = [:]
        var result: Set<String> = []
        var fenced = false
        for line in text.split(separator: "\n") {
            if line.hasPrefix("```") { fenced.toggle(); continue }
            guard !fenced, line.hasPrefix("#") else { continue }
            let title = line.drop { $0 == "#" }.trimmingCharacters(in: .whitespaces)
            let slug = String(title.lowercased().compactMap { character -> Character? in
                if character == " " { return "-" }
                if character.isLetter || character.isNumber || character == "-" || character == "_" { return character }
                return nil
            })
            let count = seen[slug, default: 0]
            seen[slug] = count + 1
            result.insert(count == 0 ? slug : "\(slug)-\(count)")
        }
        return result
    }

    /// `link` relative to the folder `from` (path components below the root), `..` taken out.
    static func resolve(_ link: String, from folder: [String]) -> String {
        var components = folder
        for component in link.split(separator: "/") {
            if component == ".." { _ = components.popLast() } else if component != "." { components.append(String(component)) }
        }
        return components.joined(separator: "/")
    }

    @Test("every relative link names a file that exists, and every anchor a heading in it")
    func linksResolve() throws {
        var checked = 0
        for document in try Self.documents() {
            let text = try String(contentsOf: Self.root.appendingPathComponent(document), encoding: .utf8)
            let folder = document.split(separator: "/").dropLast().map(String.init)
            for link in Self.links(in: text) where !link.contains("://") && !link.hasPrefix("mailto:") {
                checked += 1
                let parts = link.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
                let target = parts[0].isEmpty ? document : Self.resolve(parts[0], from: folder)
                let path = Self.root.appendingPathComponent(target).path
                guard FileManager.default.fileExists(atPath: path) else {
                    Issue.record("\(document): [\(link)]: no file \(target)")
                    continue
                }
                guard parts.count == 2, target.hasSuffix(".md") else { continue }
                let anchors = Self.anchors(in: try String(contentsOfFile: path, encoding: .utf8))
                #expect(anchors.contains(parts[1]), "\(document): [\(link)]: \(target) has no heading #\(parts[1])")
            }
        }
        #expect(checked > 10, "only \(checked) relative links found: is the parser reading the documents?")
    }

    @Test("the anchor of a heading is GitHub's")
    func anchorsAsGitHub() {
        #expect(Self.anchors(in: "# imgd\n## `imgd prefetch`\n### https and HTTP/2\n## Address policy, SSRF and its limit\n## Tests\n## Tests\n")
            == ["imgd", "imgd-prefetch", "https-and-http2", "address-policy-ssrf-and-its-limit", "tests", "tests-1"])
        #expect(Self.resolve("../contrib/fleet/README.md", from: ["docs"]) == "contrib/fleet/README.md")
        #expect(Self.links(in: "see [a](b.md#c) and `[x](not)`\n```\n[y](code)\n```\n[z](../d)") == ["b.md#c", "../d"])
    }
}
