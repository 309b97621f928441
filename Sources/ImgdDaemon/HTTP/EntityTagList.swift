/// An `If-None-Match` or `If-Range` value compared with an image's entity tag (RFC 9110 §8.8.3):
/// imgd's tags are strong, `"<sha256 hex>"`.
enum EntityTagList {
    /// Whether `header` (a list of tags, or `*`) matches `tag` under the weak comparison
    /// `If-None-Match` uses (`W/` ignored).
    static func weaklyMatches(_ header: String, tag: String) -> Bool {
        for item in header.split(separator: ",") {
            var candidate = item.trimmingSpaces
            if candidate == "*" { return true }
            if candidate.hasPrefix("W/") { candidate = candidate.dropFirst(2) }
            if candidate == tag { return true }
        }
        return false
    }

    /// Whether an `If-Range` value lets a range be served: a strong tag equal to `tag`, or a
    /// date equal to `lastModified` (an exact match: imgd's dates are its own).
    static func rangeValidatorHolds(_ header: String, tag: String, lastModified: String) -> Bool {
        let value = header.trimmingSpaces
        if value.hasPrefix("W/") { return false }
        if value.hasPrefix("\"") { return value == tag }
        return value == lastModified
    }
}
