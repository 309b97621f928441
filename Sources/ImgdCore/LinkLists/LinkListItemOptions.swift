import ImgdBase

/// What an object item of a JSON link list (or of an `add`) says besides its URL:
/// `{"url": "…", "key": "…", "sha256": "<64 hex>", "pin": "24h", "priority": "high", "refresh": "1d"}`.
/// Every field is optional; a plain string item has none.
public struct LinkListItemOptions: Sendable, Equatable {
    /// The cache key chosen for the image, instead of one derived from its URL (hashed like a
    /// URL: ``CacheKey/init(chosen:)``).
    public var key: String?
    /// The digest the body must have; a body that differs fails as `checksum_mismatch`.
    public var sha256: SHA256Digest?
    /// How long the image stays pinned once cached, over the list's own `pin`.
    public var pin: Duration?
    /// `high`: requested before the list's other items, at on-demand priority (as `add`'s
    /// `priority: "high"`).
    public var isHighPriority = false
    /// When its cached entry is due for revalidation, over the list's and the daemon's rule.
    public var refresh: RefreshRule?
    /// Other URLs of the same image (`"mirrors": ["https://b.example/x.png"]`), tried in order
    /// when the URL fails in a way a mirror can cure; the entry keeps the URL's key (or the
    /// item's ``key``). At most ``maximumMirrors``.
    public var mirrors: [ImageURL] = []

    public init(key: String? = nil, sha256: SHA256Digest? = nil, pin: Duration? = nil, isHighPriority: Bool = false) {
        self.key = key
        self.sha256 = sha256
        self.pin = pin
        self.isHighPriority = isHighPriority
    }

    /// No option set: what a string item has.
    public static let none = LinkListItemOptions()

    /// Sets the option `field` from its text; unknown fields are ignored (a newer producer may
    /// add some), and a known one with a value it cannot take throws the reason.
    public mutating func set(_ field: String, to value: String) throws(LinkListItemError) {
        switch field {
        case "key":
            guard !value.isEmpty else { throw LinkListItemError(field: field, reason: "an empty key") }
            guard value.utf8.count <= Self.maximumValueBytes else {
                throw LinkListItemError(field: field, reason: "longer than \(Self.maximumValueBytes) bytes")
            }
            key = value
        case "sha256":
            guard let digest = SHA256Digest(hex: value) else {
                throw LinkListItemError(field: field, reason: "'\(EchoedText.cut(value, limit: 80))' is not 64 hexadecimal digits")
            }
            sha256 = digest
        case "pin":
            do {
                pin = try Duration.parsing(value)
            } catch {
                throw LinkListItemError(field: field, reason: "\(error)")
            }
        case "refresh":
            do {
                refresh = try RefreshRule(parsing: value)
            } catch {
                throw LinkListItemError(field: field, reason: "\(error)")
            }
        case "priority":
            switch value {
            case "high": isHighPriority = true
            case "normal": isHighPriority = false
            default: throw LinkListItemError(field: field, reason: "'\(EchoedText.cut(value, limit: 80))' is neither high nor normal")
            }
        default:
            break
        }
    }

    /// Mirrors an item may name: 8.
    public static let maximumMirrors = 8

    /// Appends the mirror `text`, the `index`-th (0-based) of the item's `mirrors`: an absolute
    /// http(s) URL, at most ``maximumMirrors`` of them. Throws the reason, naming the mirror.
    public mutating func addMirror(_ text: String, index: Int) throws(LinkListItemError) {
        guard mirrors.count < Self.maximumMirrors else {
            throw LinkListItemError(field: "mirrors", reason: "more than \(Self.maximumMirrors) mirrors")
        }
        do {
            mirrors.append(try ImageURL(text))
        } catch {
            throw LinkListItemError(
                field: "mirrors", reason: "mirror \(index + 1) '\(EchoedText.cut(text, limit: 200))': \(error)")
        }
    }

    /// The longest value of an option (a key is a name, not a document): 1 KiB.
    public static let maximumValueBytes = 1024

    /// The fields ``set(_:to:)`` reads (the others are ignored).
    public static let fields: Set<String> = ["url", "key", "sha256", "pin", "priority", "refresh"]
}

/// Why a field of an object item cannot be used.
public struct LinkListItemError: Error, Sendable, Equatable, CustomStringConvertible {
    public let field: String
    public let reason: String

    public init(field: String, reason: String) {
        self.field = field
        self.reason = reason
    }

    public var description: String { "bad \(field): \(reason)" }
}
