/// When a signed URL stops working, read from its own query: what S3, CloudFront, Google Cloud
/// Storage and Azure write into the URLs they sign. Host-independent: any URL of these forms is
/// read, whatever its host; a URL of none of them (or with a malformed value) has no known
/// expiry, and is fetched as any other URL.
///
/// The forms, parameter names compared without regard to case (as S3 and GCS accept them):
/// - S3 SigV4: `X-Amz-Date=YYYYMMDDTHHMMSSZ` and `X-Amz-Expires=SECONDS`: the date plus the seconds.
/// - GCS V4: `X-Goog-Date` and `X-Goog-Expires`, the same way.
/// - CloudFront and S3 SigV2: `Expires=EPOCH_SECONDS`, only beside a `Signature` parameter.
/// - Azure SAS: `se=` an ISO 8601 UTC time (`2026-12-07T05:30:00Z`, `2026-12-07T05:30Z`, with
///   fractional seconds or a `+hh:mm` offset) or a date (`2026-12-07`, its first instant), only
///   beside a `sig` parameter.
///
/// `Expires` and `se` are ordinary words that other URLs use for other things, so they count
/// only with the signature that names them a signed URL's. A parameter given twice makes its form
/// unknown (servers differ on which one they read); when several forms are present, the earliest
/// expiry counts. Values longer than ``maximumValueLength`` are not read. Never throws: a
/// malformed value means "no known expiry", not a failure of the URL.
public struct URLExpiry: Sendable, Hashable, CustomStringConvertible {
    /// Which parameters said it.
    public enum Form: String, Sendable {
        case amazonV4 = "X-Amz-Date + X-Amz-Expires"
        case google = "X-Goog-Date + X-Goog-Expires"
        case expires = "Expires"
        case azure = "se"
    }

    /// The instant the URL stops working, in milliseconds since 1970 (UTC).
    public let milliseconds: Int
    /// The parameters it was read from.
    public let form: Form

    /// Bytes of a value read at most: every valid one is far shorter.
    public static let maximumValueLength = 40
    /// Seconds an `X-Amz-Expires` or `X-Goog-Expires` may say at most (S3 and GCS allow 7 days):
    /// past it the value is not a real lifetime. 100 years.
    static let maximumSeconds = 100 * 366 * 86_400

    public init(milliseconds: Int, form: Form) {
        self.milliseconds = milliseconds
        self.form = form
    }

    /// The expiry `url` states, or nil when it states none imgd reads.
    public init?(_ url: ImageURL) {
        self.init(urlText: url.normalized)
    }

    /// The expiry the URL text `urlText` states in its query (after `?`, before `#`), or nil.
    public init?(urlText: String) {
        let bytes = urlText.utf8
        // A `?` in the fragment is not the query's.
        let end = bytes.firstIndex(of: UInt8(ascii: "#")) ?? bytes.endIndex
        guard let mark = bytes[..<end].firstIndex(of: UInt8(ascii: "?")) else { return nil }
        let query = bytes[bytes.index(after: mark)..<end]
        var values = Parameters()
        for pair in query.split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: true) {
            let equals = pair.firstIndex(of: UInt8(ascii: "=")) ?? pair.endIndex
            guard let name = Parameters.Name(pair[pair.startIndex..<equals]) else { continue }
            let value = equals == pair.endIndex ? pair[pair.endIndex...] : pair[pair.index(after: equals)...]
            values.note(name, value)
        }
        guard let found = values.expiry() else { return nil }
        self = found
    }

    /// Now, for comparing with an expiry: the system clock (`CLOCK_REALTIME`), not this run's
    /// steady ``WallClock/nowMilliseconds()``: the origin judges a signature by its own clock,
    /// which NTP keeps with the system's.
    public static func now() -> Int { WallClock.systemMilliseconds() }

    /// Whether the URL has stopped working at `now` (milliseconds since 1970): its expiry is not
    /// after it.
    public func isExpired(at now: Int) -> Bool { milliseconds <= now }

    /// The expiry as ISO 8601 UTC, to the second: `2026-12-07T05:30:00Z`.
    public var iso8601: String { Self.iso8601(milliseconds: milliseconds) }

    public var description: String { "\(iso8601) (\(form.rawValue))" }

    /// `milliseconds` since 1970 as ISO 8601 UTC, to the second (`2026-12-07T05:30:00Z`); before
    /// 1970 is written as 1970's first second.
    public static func iso8601(milliseconds: Int) -> String {
        let seconds = max(milliseconds, 0) / 1000
        let (year, month, day) = HTTPDate.civil(daysSinceEpoch: seconds / 86_400)
        let second = seconds % 86_400
        func two(_ value: Int) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return "\(year)-\(two(month))-\(two(day))T\(two(second / 3600)):\(two(second / 60 % 60)):\(two(second % 60))Z"
    }
}

extension URLExpiry {
    /// The parameters of a query that bear on its expiry, as read.
    fileprivate struct Parameters {
        enum Name: CaseIterable {
            case amzDate, amzExpires, googDate, googExpires, expires, signature, se, sig

            /// The lower-cased name it is written as.
            var text: String {
                switch self {
                case .amzDate: "x-amz-date"
                case .amzExpires: "x-amz-expires"
                case .googDate: "x-goog-date"
                case .googExpires: "x-goog-expires"
                case .expires: "expires"
                case .signature: "signature"
                case .se: "se"
                case .sig: "sig"
                }
            }

            /// The name `raw` (percent-decoded, any case), if it is one of these.
            init?(_ raw: Substring.UTF8View.SubSequence) {
                guard raw.count >= 2, raw.count <= 3 * 14 else { return nil }
                guard let decoded = Parameters.decode(raw) else { return nil }
                let lowered = decoded.lowercased()
                guard let name = Name.allCases.first(where: { $0.text == lowered }) else { return nil }
                self = name
            }
        }

        /// Each name's value: nil when absent, `.some(nil)` when given twice (unknown).
        private var values: [Name: String?] = [:]

        mutating func note(_ name: Name, _ raw: Substring.UTF8View.SubSequence) {
            if values[name] != nil {
                values[name] = .some(nil)
                return
            }
            values[name] = .some(raw.count <= 3 * URLExpiry.maximumValueLength ? Parameters.decode(raw) : nil)
        }

        private func value(_ name: Name) -> String? { values[name] ?? nil }
        private func isPresent(_ name: Name) -> Bool { values[name] != nil }

        /// The earliest expiry of the forms found whole.
        func expiry() -> URLExpiry? {
            var found: [URLExpiry] = []
            if let date = value(.amzDate), let seconds = value(.amzExpires), let at = Self.signedAt(date, plus: seconds) {
                found.append(URLExpiry(milliseconds: at, form: .amazonV4))
            }
            if let date = value(.googDate), let seconds = value(.googExpires), let at = Self.signedAt(date, plus: seconds) {
                found.append(URLExpiry(milliseconds: at, form: .google))
            }
            if isPresent(.signature), let text = value(.expires), let seconds = Self.seconds(text), seconds <= Self.lastSecond {
                found.append(URLExpiry(milliseconds: seconds * 1000, form: .expires))
            }
            if isPresent(.sig), let text = value(.se), let at = Self.iso8601(text) {
                found.append(URLExpiry(milliseconds: at, form: .azure))
            }
            return found.min { $0.milliseconds < $1.milliseconds }
        }

        /// 9999-12-31T23:59:59Z, the last instant an `Expires` may name.
        static let lastSecond = 253_402_300_799

        /// Percent-decodes `raw` (`+` stays `+`: these values never hold a space); nil when an
        /// escape is broken or the bytes are not UTF-8.
        static func decode(_ raw: Substring.UTF8View.SubSequence) -> String? {
            guard raw.contains(UInt8(ascii: "%")) else { return String(Substring(raw)) }
            var bytes: [UInt8] = []
            bytes.reserveCapacity(raw.count)
            var index = raw.startIndex
            while index < raw.endIndex {
                let byte = raw[index]
                if byte == UInt8(ascii: "%") {
                    let first = raw.index(after: index)
                    guard first < raw.endIndex, raw.index(after: first) < raw.endIndex,
                        let high = hexValue(raw[first]), let low = hexValue(raw[raw.index(after: first)])
                    else { return nil }
                    bytes.append(high << 4 | low)
                    index = raw.index(first, offsetBy: 2)
                } else {
                    bytes.append(byte)
                    index = raw.index(after: index)
                }
            }
            return String(validating: bytes, as: UTF8.self)
        }

        private static func hexValue(_ byte: UInt8) -> UInt8? {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
            default: nil
            }
        }

        /// A count of seconds: 1 to 12 ASCII digits (no sign, no space, no fraction).
        static func seconds(_ text: String) -> Int? {
            guard (1...12).contains(text.utf8.count), text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
            return Int(text)
        }

        /// SigV4's `X-Amz-Date` (`YYYYMMDDTHHMMSSZ`, UTC) plus `expires` seconds, in milliseconds.
        static func signedAt(_ date: String, plus expires: String) -> Int? {
            guard let lifetime = seconds(expires), lifetime <= URLExpiry.maximumSeconds else { return nil }
            let bytes = Array(date.utf8)
            guard bytes.count == 16, bytes[8] == UInt8(ascii: "T"), bytes[15] == UInt8(ascii: "Z"),
                let year = number(bytes[0..<4]), let month = number(bytes[4..<6]), let day = number(bytes[6..<8]),
                let hour = number(bytes[9..<11]), let minute = number(bytes[11..<13]), let second = number(bytes[13..<15]),
                let start = instant(year: year, month: month, day: day, hour: hour, minute: minute, second: second)
            else { return nil }
            return start + lifetime * 1000
        }

        /// Azure's `se`: `YYYY-MM-DD`, optionally `Thh:mm`, `:ss`, `.fraction`, then `Z` or
        /// `±hh:mm` (required after a time). In milliseconds since 1970.
        static func iso8601(_ text: String) -> Int? {
            let bytes = Array(text.utf8)
            guard bytes.count >= 10, bytes[4] == UInt8(ascii: "-"), bytes[7] == UInt8(ascii: "-"),
                let year = number(bytes[0..<4]), let month = number(bytes[5..<7]), let day = number(bytes[8..<10])
            else { return nil }
            if bytes.count == 10 { return instant(year: year, month: month, day: day, hour: 0, minute: 0, second: 0) }
            guard bytes.count >= 17, bytes[10] == UInt8(ascii: "T"), bytes[13] == UInt8(ascii: ":"),
                let hour = number(bytes[11..<13]), let minute = number(bytes[14..<16])
            else { return nil }
            var index = 16
            var second = 0
            if bytes[index] == UInt8(ascii: ":") {
                guard bytes.count >= index + 3, let value = number(bytes[(index + 1)..<(index + 3)]) else { return nil }
                second = value
                index += 3
                if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
                    index += 1
                    let digits = index
                    while index < bytes.count, bytes[index] >= 0x30, bytes[index] <= 0x39 { index += 1 }
                    guard index > digits, index - digits <= 9 else { return nil }
                }
            }
            guard index < bytes.count, var at = instant(year: year, month: month, day: day, hour: hour, minute: minute, second: second)
            else { return nil }
            switch bytes[index] {
            case UInt8(ascii: "Z"):
                guard index + 1 == bytes.count else { return nil }
            case UInt8(ascii: "+"), UInt8(ascii: "-"):
                guard bytes.count == index + 6, bytes[index + 3] == UInt8(ascii: ":"),
                    let offsetHours = number(bytes[(index + 1)..<(index + 3)]), let offsetMinutes = number(bytes[(index + 4)..<(index + 6)]),
                    offsetHours <= 23, offsetMinutes <= 59
                else { return nil }
                // `+01:00` is an hour ahead of UTC: the same instant is an hour earlier in UTC.
                let offset = (offsetHours * 60 + offsetMinutes) * 60_000
                at += bytes[index] == UInt8(ascii: "+") ? -offset : offset
            default:
                return nil
            }
            return at
        }

        /// The ASCII digits `digits` as a number; nil when any is not a digit.
        private static func number(_ digits: ArraySlice<UInt8>) -> Int? {
            var value = 0
            for byte in digits {
                guard byte >= 0x30, byte <= 0x39 else { return nil }
                value = value * 10 + Int(byte - 0x30)
            }
            return value
        }

        /// The instant, in milliseconds since 1970, when every field is in range (leap seconds
        /// and days past the month's end are refused) and the year is 1970 to 9999.
        private static func instant(year: Int, month: Int, day: Int, hour: Int, minute: Int, second: Int) -> Int? {
            guard (1970...9999).contains(year), (1...12).contains(month), day >= 1, hour <= 23, minute <= 59, second <= 59
            else { return nil }
            let days = HTTPDate.daysSinceEpoch(year: year, month: month, day: day)
            // A day past the month's end (Feb 30) comes back as another month's.
            guard HTTPDate.civil(daysSinceEpoch: days) == (year, month, day) else { return nil }
            return ((days * 24 + hour) * 60 + minute) * 60_000 + second * 1000
        }
    }
}
