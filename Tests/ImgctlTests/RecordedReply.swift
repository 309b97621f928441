import Foundation

@testable import ImgctlCLI
import ImgdProtocol

/// Replies recorded from the real daemon, in `Fixtures/`: `NAME.json` is the `result` of a
/// command (`status`, `stats`, `lists`, `get`, `get-data`, `failed-list`, …) and
/// `event-NAME.json` the `data` of an event, each as the daemon sent it. ImgdIntegrationTests
/// asks a live daemon the same requests and fails when a fixture's field names or value types
/// no longer match its reply; `IMGD_RECORD_FIXTURES=1` records them anew.
///
/// Tests that need other values (a count, a name) change the values of the recorded fields,
/// never the set of fields nor the JSON type of a value: ``value(_:replacing:)``.
enum RecordedReply {
    static let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures").path

    /// The fixture `name`, parsed; a test that names a missing fixture stops with a clear message.
    static func value(_ name: String) -> JSONValue {
        guard let data = FileManager.default.contents(atPath: folder + "/" + name + ".json"), let value = (try? JSONValue(parsing: data)) else {
            preconditionFailure("no fixture \(name).json in \(folder)")
        }
        return value
    }

    /// The fixture `name` with the values of some of its fields replaced, named by path
    /// (`cache.bytes`); each field must be one the daemon sends (and so the fixture has), so a
    /// test cannot invent one, and each value must have the recorded value's shape
    /// (``sameShape(_:as:)``), so a test cannot feed a type the daemon never sends.
    static func value(_ name: String, replacing changes: [String: JSONValue]) -> JSONValue {
        var result = value(name)
        for (path, replacement) in changes {
            result = replaced(result, at: path.split(separator: ".").map(String.init)[...], with: replacement, in: name)
        }
        return result
    }

    private static func replaced(_ value: JSONValue, at path: ArraySlice<String>, with replacement: JSONValue, in name: String) -> JSONValue {
        guard let key = path.first else {
            precondition(
                sameShape(replacement, as: value),
                "\(name).json: \(replacement.jsonText) does not have the shape of the recorded \(value.jsonText)")
            return replacement
        }
        guard case .object(var members) = value, let member = members[key] else {
            preconditionFailure("\(name).json has no field \(key): the daemon does not send it")
        }
        members[key] = replaced(member, at: path.dropFirst(), with: replacement, in: name)
        return .object(members)
    }

    /// Whether `replacement` is of the JSON type the daemon recorded as `recorded`: the same case
    /// (an int is not a double); an array's elements each shaped as the recorded first element;
    /// an object's members that the recorded object also has, shaped as those. A recorded null
    /// takes any value (the daemon sends null for a field that can also hold one, such as `next`).
    static func sameShape(_ replacement: JSONValue, as recorded: JSONValue) -> Bool {
        switch (recorded, replacement) {
        case (.null, _): true
        case (.bool, .bool), (.int, .int), (.double, .double), (.string, .string): true
        case (.array(let old), .array(let new)):
            old.first.map { first in new.allSatisfy { sameShape($0, as: first) } } ?? true
        case (.object(let old), .object(let new)):
            new.allSatisfy { key, member in old[key].map { sameShape(member, as: $0) } ?? true }
        default: false
        }
    }

    /// The fixture's compact text, as a scripted server sends it.
    static func text(_ name: String) -> String { value(name).jsonText }

    /// The recorded `lists` entry with these values: what `lists` says of one list.
    static func list(
        name: String, state: String, total: Int, cached: Int, alreadyCached: Int, failed: Int, pending: Int, bytes: Int
    ) -> JSONValue {
        guard case .array(let entries) = value("lists")["lists"], case .object(var entry) = entries.first else {
            preconditionFailure("lists.json holds no list")
        }
        let changes: [String: JSONValue] = [
            "name": .string(name), "state": .string(state), "total": JSONValue(total), "cached": JSONValue(cached),
            "already_cached": JSONValue(alreadyCached), "failed": JSONValue(failed), "pending": JSONValue(pending), "bytes": JSONValue(bytes),
        ]
        for (key, replacement) in changes {
            guard let recorded = entry[key] else { preconditionFailure("lists.json's entry has no field \(key)") }
            precondition(sameShape(replacement, as: recorded), "lists.json's \(key) is not \(replacement.jsonText)'s type")
            entry[key] = replacement
        }
        return .object(entry)
    }

    /// `{"lists":[ENTRIES]}` as compact text.
    static func lists(_ entries: [JSONValue]) -> String {
        JSONValue.object(["lists": .array(entries)]).jsonText
    }
}
