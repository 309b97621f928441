import Foundation
import ImgdTestSupport
@testable import ImgdDaemon
import Testing

/// The settings table is the one source of the settings' names, defaults and reloadability:
/// the defaults it derives are the values the daemon had, and docs/settings.md's table of
/// settings is the one it generates (``regenerate`` writes it).
@Suite("Configuration: each setting declared once, docs/settings.md's table from the declarations", .offThePool)
struct SettingDeclarationTests {
    /// Each setting's default as a flag spells it, as `imgd` has always had them: a default
    /// moved to the type that uses it keeps its value.
    static let defaults: [String: String?] = [
        "spool": "./imgd-data/spool", "cache": "./imgd-data/cache", "state": "./imgd-data/state",
        "socket": "./imgd-data/imgd.sock", "disk-limit": "1GiB", "max-age": "7d", "sweep-interval": "10m",
        "refresh": "off", "min-fresh": "1m",
        "memory-limit": "64MiB", "max-parallel": "8", "max-per-host": "4", "attempts": "3", "max-body-bytes": "64MiB",
        "timeout": "2m", "max-rate": "0", "max-rate-applies-to": "prefetch", "proxy": nil, "tier": nil, "tier-fallback": "true", "ca-file": nil, "headers-file": nil, "deny": nil, "deny-defaults": "true", "max-connections": "256",
        "max-connections-per-peer": "32", "admin-group": nil, "pressure-threshold": "10", "log-level": "info", "max-list-bytes": "1GiB",
        "max-list-lines": "10000000", "sitemap-max-depth": "2", "sitemap-max-children": "1000", "max-active-lists": "16", "max-add-urls": "10000", "max-queued": "100000", "max-data-bytes": "4MiB",
        "max-queued-bytes": "64MiB",
        "max-queued-share": "25",
        "http-listen": nil, "http-allow-remote": "false", "http-max-connections": "256", "http-max-connections-per-peer": "64",
        "http-header-bytes": "32KiB", "http-header-timeout": "10s", "http-idle-timeout": "75s",
        "ready-lists": nil, "ready-fraction": "1",
        "courtesy": "true", "courtesy-threshold": "20%", "courtesy-pressure": nil,
        "quota-per-user": nil,
    ]

    @Test("every default is the value imgd had, whichever type now holds it")
    func defaultsKeptTheirValues() {
        #expect(Set(DaemonConfig.settingNames) == Set(Self.defaults.keys))
        for setting in DaemonConfig.settings {
            #expect(setting.defaultSpelling == Self.defaults[setting.name] ?? nil, "\(setting.name)")
        }
    }

    @Test("a spelled default reads back as the default: the flag syntax round-trips")
    func spelledDefaultsLoad() throws {
        let embedded = DaemonConfig.embedded(environment: [:])
        var config = embedded
        for setting in DaemonConfig.settings {
            guard let spelled = setting.defaultSpelling else { continue }
            try config.set(setting.name, to: .string(spelled), origin: "--\(setting.name)")
        }
        #expect(config == embedded)
    }

    @Test("the folders' defaults under systemd are shown from the same declaration")
    func systemdDefaults() {
        let underSystemd = Dictionary(uniqueKeysWithValues: DaemonConfig.settings.compactMap { setting in
            setting.systemdDefaultSpelling.map { (setting.name, $0) }
        })
        #expect(underSystemd == [
            "spool": "$STATE_DIRECTORY/spool", "cache": "$CACHE_DIRECTORY", "state": "$STATE_DIRECTORY",
            "socket": "$RUNTIME_DIRECTORY/imgd.sock",
        ])
    }

    /// The package's root folder.
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// A text file under the package's root (`docs/settings.md`).
    static func document(_ relative: String) throws -> String {
        try String(contentsOf: root.appendingPathComponent(relative), encoding: .utf8)
    }

    /// The command that writes the table into docs/settings.md from the declarations (the same
    /// test, told to write first, as `IMGD_RECORD_FIXTURES=1` does for imgctl's recorded replies).
    static let regenerate = "IMGD_WRITE_DOCS=1 swift test --skip-build --filter SettingDeclarationTests"

    /// Whether this run writes the generated texts before checking them.
    static var writing: Bool { ProcessInfo.processInfo.environment["IMGD_WRITE_DOCS"] == "1" }

    /// The lines of `text` from the table headed `header` to its last row: where it starts and how many.
    static func table(headed header: String, in lines: [String]) -> (start: Int, count: Int)? {
        guard let start = lines.firstIndex(of: header) else { return nil }
        return (start, lines[start...].prefix { $0.hasPrefix("|") }.count)
    }

    @Test("docs/settings.md's table of settings is the declarations' (names, defaults, what SIGHUP does, help)")
    func settingsTableMatches() throws {
        let expected = DaemonConfig.settingsMarkdownTable.split(separator: "\n").map(String.init)
        var lines = try Self.document("docs/settings.md").split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        if Self.writing, let (start, count) = Self.table(headed: expected[0], in: lines) {
            lines.replaceSubrange(start..<start + count, with: expected)
            try lines.joined(separator: "\n").write(to: Self.root.appendingPathComponent("docs/settings.md"), atomically: true, encoding: .utf8)
        }
        let (start, count) = try #require(
            Self.table(headed: expected[0], in: lines),
            "docs/settings.md has no table headed \(expected[0]); it should hold:\n\(DaemonConfig.settingsMarkdownTable)")
        let table = Array(lines[start..<start + count])
        // Cell by cell, so a failure names the setting and the column; then whole, with the command that writes it.
        func cells(_ row: String) -> [String] {
            row.split(separator: "|", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
        }
        #expect(table.count == expected.count, "docs/settings.md's table has \(table.count - 2) settings, not \(expected.count - 2)")
        for (found, wanted) in zip(table.dropFirst(2), expected.dropFirst(2)) {
            let (foundCells, wantedCells) = (cells(found), cells(wanted))
            #expect(foundCells.count == wantedCells.count, "\(found)")
            for (column, (have, want)) in zip(["", "setting", "default", "SIGHUP", "what it sets"], zip(foundCells, wantedCells)) {
                #expect(have == want, "\(wantedCells[1]): \(column)")
            }
        }
        let matches = table == expected  // a Bool: the message, not two whole tables, is what a failure shows
        #expect(matches, "docs/settings.md's table of settings differs from the declarations; write it anew with: \(Self.regenerate)")
    }

    @Test("docs/usage.md's synopsis of imgd run names every setting's flag once, and no other but --config")
    func synopsisMatches() throws {
        let usage = try Self.document("docs/usage.md")
        let start = try #require(usage.range(of: "imgd [run] "))
        let end = try #require(usage.range(of: "```", range: start.upperBound..<usage.endIndex))
        let flags = usage[start.lowerBound..<end.lowerBound].split(whereSeparator: \.isWhitespace)
            .filter { $0.hasPrefix("[--") }.map { String($0.dropFirst().prefix { $0 != "]" }) }
        #expect(flags.sorted() == (DaemonConfig.settingNames.map { "--\($0)" } + ["--config"]).sorted())
    }

    @Test("no declared text breaks a Markdown table row")
    func textsFitATable() {
        for setting in DaemonConfig.settings {
            #expect(setting.markdownRow.split(separator: "|", omittingEmptySubsequences: false).count == 6, "\(setting.name)")
        }
    }
}
