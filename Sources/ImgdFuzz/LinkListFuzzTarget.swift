@_spi(Fuzzing) import ImgdCore

/// Reads the input as a link list twice: once as the spool reads a file (64 KiB reads), once
/// cut at random places (the same 64 KiB buffer, but each read(2) asks for 1 byte to 64 KiB, as
/// a pipe or a network filesystem may return), both under a random byte limit, and requires both
/// reads to give the same entries, the same `# pin:` and the same error at the same place.
/// The parsers stream, so a cut in the middle of a URL, a UTF-8 sequence, a JSON escape or an
/// XML entity must change nothing.
enum LinkListFuzzTarget {
    static func run(_ input: inout FuzzInput, format: LinkListFormat) throws(FuzzFinding) {
        let target = "link-list-\(format.rawValue)"
        var readSizes: [Int] = []
        for _ in 0..<Int(input.byte() % 8 + 1) {
            readSizes.append(input.pick([1, 2, 3, 4, 5, 7, 8, 13, 16, 64, 100, 255, 1024, 4096, 8192, 65536]))
        }
        let limitChoice = input.byte()
        let payload = input.payload
        // A limit below the size sometimes, as the spool reads a list only up to its size when claimed.
        let byteLimit: Int? = limitChoice < 200 ? nil : Int(limitChoice - 200) * max(1, payload.count / 55)
        let file = ScratchFile(holding: payload)

        let whole = read(file, format: format, byteLimit: byteLimit, readSizes: nil)
        let cut = read(file, format: format, byteLimit: byteLimit, readSizes: readSizes)
        // A sitemap fetched by the daemon is read from memory, whole: the same as from a file.
        if format == .xml, byteLimit == nil {
            let memory = readFromMemory(payload)
            guard memory == whole else {
                throw FuzzFinding(
                    target: target, "reading from memory gave another result than from a file:\nfile:   \(whole)\nmemory: \(memory)")
            }
        }
        guard whole == cut else {
            throw FuzzFinding(
                target: target,
                "reading in pieces of \(readSizes) gave another result than one read (limit \(String(describing: byteLimit))):\n"
                    + "whole: \(whole)\ncut:   \(cut)")
        }
    }

    /// What a read of the scratch file gave, written out so two reads can be compared.
    struct Outcome: Equatable, CustomStringConvertible {
        var entries: [String] = []
        var pin: String = "nil"
        var error: String?

        var description: String {
            "\(entries.count) entries, pin \(pin), error \(error ?? "none"): \(entries.prefix(20).joined(separator: "; "))"
        }
    }

    /// A text, its long middle elided, so that a report shows where two reads differ.
    static func describe(_ text: String) -> String {
        let utf8 = Array(text.utf8)
        guard utf8.count > 120 else { return text.debugDescription }
        let head = String(decoding: utf8.prefix(50), as: UTF8.self)
        let tail = String(decoding: utf8.suffix(50), as: UTF8.self)
        return "\((head + "…" + tail).debugDescription) (\(utf8.count) bytes)"
    }

    private static func readFromMemory(_ payload: [UInt8]) -> Outcome {
        var outcome = Outcome()
        var reader = LinkListReader(xml: payload, path: "fuzz")
        do throws(LinkListError) {
            defer { outcome.pin = String(describing: reader.pin) }
            while let entry = try reader.next() { outcome.entries.append(entry.fuzzDescription) }
            if let extra = try reader.next() { outcome.entries.append("after the end: \(extra.line)") }
            outcome.entries.append("sitemap \(String(describing: reader.sitemapKind)), skipped \(reader.skippedPageLocations)")
        } catch {
            outcome.error = error.description
        }
        return outcome
    }

    private static func read(_ file: ScratchFile, format: LinkListFormat, byteLimit: Int?, readSizes: [Int]?) -> Outcome {
        var outcome = Outcome()
        let fd = file.openForReading()
        do throws(LinkListError) {
            var reader: LinkListReader
            if let readSizes {
                reader = try LinkListReader(
                    fileDescriptor: fd, path: "fuzz", format: format, byteLimit: byteLimit,
                    readSizes: readSizes)
            } else {
                reader = try LinkListReader(fileDescriptor: fd, path: "fuzz", format: format, byteLimit: byteLimit)
            }
            defer { outcome.pin = String(describing: reader.pin) }
            while let entry = try reader.next() { outcome.entries.append(entry.fuzzDescription) }
            // A reader that has ended stays ended.
            if let extra = try reader.next() {
                outcome.entries.append("after the end: \(extra.line)")
            }
            if format == .xml {
                outcome.entries.append("sitemap \(String(describing: reader.sitemapKind)), skipped \(reader.skippedPageLocations)")
            }
        } catch {
            outcome.error = error.description
        }
        return outcome
    }
}

extension LinkListEntry {
    /// The entry as the fuzz target compares it.
    fileprivate var fuzzDescription: String {
        "line \(line): \(LinkListFuzzTarget.describe(text)) → \(LinkListFuzzTarget.describe("\(url)"))\(isSitemap ? " (sitemap)" : "")"
    }
}
