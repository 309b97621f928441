/// An SVG's size in pixels, from its root element's `width`, `height` and `viewBox`.
///
/// Only lengths that are plain numbers or `px` count: percentages and `em` depend on where the
/// image is shown, and physical units (`mm`, `in`) are rare enough not to guess at.
enum SVGDimensions {
    /// `width`/`height` when both are plain pixel lengths; the `viewBox` size when neither is;
    /// when only one is, the other follows from the `viewBox`'s aspect ratio (as browsers do).
    /// Nil when the tag gives no usable size.
    static func size(of tag: SVGStartTag) -> (width: Int, height: Int)? {
        let width = tag.attributes["width"].flatMap(pixels)
        let height = tag.attributes["height"].flatMap(pixels)
        let viewBox = tag.attributes["viewBox"].flatMap(viewBoxSize)
        let size: (Double, Double)
        switch (width, height, viewBox) {
        case let (width?, height?, _): size = (width, height)
        case let (width?, nil, box?): size = (width, width * box.height / box.width)
        case let (nil, height?, box?): size = (height * box.width / box.height, height)
        case let (nil, nil, box?): size = (box.width, box.height)
        default: return nil
        }
        guard let roundedWidth = rounded(size.0), let roundedHeight = rounded(size.1) else { return nil }
        return (roundedWidth, roundedHeight)
    }

    /// A length that is a plain number or ends in `px`, if positive.
    static func pixels(_ text: String) -> Double? {
        guard let first = text.firstIndex(where: { !$0.isWhitespace }),
            let last = text.lastIndex(where: { !$0.isWhitespace })
        else { return nil }
        var value = text[first...last]
        if value.hasSuffix("px") { value = value.dropLast(2) }
        guard let number = number(value), number > 0 else { return nil }
        return number
    }

    /// The third and fourth numbers of a `viewBox` ("min-x min-y width height"), if positive.
    static func viewBoxSize(_ text: String) -> (width: Double, height: Double)? {
        let parts = text.split(whereSeparator: { $0 == "," || $0.isWhitespace })
        guard parts.count == 4, let width = number(parts[2]), let height = number(parts[3]),
            width > 0, height > 0, number(parts[0]) != nil, number(parts[1]) != nil
        else { return nil }
        return (width, height)
    }

    /// An SVG number: optional sign, digits with an optional fraction, optional exponent.
    /// Stricter than `Double(_:)`, which would also take "inf", "nan" and hexadecimal.
    private static func number(_ text: Substring) -> Double? {
        guard !text.isEmpty, text.allSatisfy({ "0123456789+-.eE".contains($0) }),
            text.contains(where: \.isNumber), let value = Double(text), value.isFinite
        else { return nil }
        return value
    }

    /// Whole pixels. Under one pixel means no usable size; absurd sizes are capped so the pixel
    /// limit, not an integer overflow, is what stops them.
    private static func rounded(_ value: Double) -> Int? {
        let whole = value.rounded()
        guard whole.isFinite, whole >= 1 else { return nil }
        return whole >= Double(Int32.max) ? Int(Int32.max) : Int(whole)
    }
}
