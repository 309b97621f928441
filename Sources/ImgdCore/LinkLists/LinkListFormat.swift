/// How a link list is written: one URL a line, a JSON array of strings, an XML property list, or
/// an XML sitemap.
public enum LinkListFormat: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// UTF-8 text, one URL a line, `#` comments (``LinkListReader`` describes the rules).
    case text
    /// A JSON array of URL strings: `["https://a.example/1.png", …]`.
    case json
    /// An XML property list holding an array of strings. Binary plists are refused.
    case plist
    /// An `.xml` file, read by its root element: a sitemap (`<urlset>`) or sitemap index
    /// (`<sitemapindex>`) in the sitemap namespace, or an XML property list (`<plist>`).
    case xml

    /// The format a file's name implies: `.json` is JSON, `.plist` is a property list, `.xml` is
    /// XML (a sitemap or a property list, by its root), and
    /// anything else is text, so lists named `.txt`, `.list` or nothing at all keep working.
    /// The extension is matched without regard to case (`LIST.JSON` is JSON).
    public init(fileName: String) {
        let name = fileName.split(separator: "/", omittingEmptySubsequences: false).last ?? ""
        guard let dot = name.lastIndex(of: ".") else {
            self = .text
            return
        }
        switch name[name.index(after: dot)...].lowercased() {
        case "json": self = .json
        case "plist": self = .plist
        case "xml": self = .xml
        default: self = .text
        }
    }

    public var description: String { rawValue }
}
