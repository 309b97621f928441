import ImgdCore
import ImgdProtocol

extension DaemonCommands {
    /// A `mirrors` value of an `add` item or a `get`: an array of absolute http(s) URL strings,
    /// at most ``LinkListItemOptions/maximumMirrors``, read as a JSON list's item reads its own.
    /// Throws the reason, naming the mirror.
    static func mirrors(_ value: JSONValue) throws(LinkListItemError) -> [ImageURL] {
        guard let elements = value.arrayValue else {
            throw LinkListItemError(field: "mirrors", reason: "not an array of URL strings but \(value.kindDescription)")
        }
        var options = LinkListItemOptions()
        for (index, element) in elements.enumerated() {
            guard let text = element.stringValue else {
                throw LinkListItemError(field: "mirrors", reason: "mirror \(index + 1) is not a string but \(element.kindDescription)")
            }
            try options.addMirror(text, index: index)
        }
        return options.mirrors
    }
}
