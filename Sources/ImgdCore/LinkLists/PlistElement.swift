/// The elements of Apple's property list DTD (`PropertyList-1.0.dtd`): the only names a plist
/// link list may use. Knowing them all lets the reader match end tags against these small
/// values instead of keeping names read from the file, and reject a foreign name at once.
enum PlistElement: String, CaseIterable, Sendable {
    case plist, array, dict, key, string, data, date, real, integer
    case `true`, `false`

    /// The longest name, so a longer one is known to be foreign without reading it all.
    static let longestName = 7

    /// The element named by `name` (exact, case-sensitive, as XML is), or nil.
    init?(name: some Collection<UInt8>) {
        guard name.count <= Self.longestName,
            let known = Self.allCases.first(where: { $0.rawValue.utf8.elementsEqual(name) })
        else { return nil }
        self = known
    }

    /// How an error message names it.
    var tag: String { "<\(rawValue)>" }
}
