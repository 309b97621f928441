import Foundation
import ImgdTestSupport
@testable import ImgdDaemon
import Testing

/// The settings table is the one source of the settings' names, defaults and reloadability:
/// the defaults it derives are the values the daemon had, and README's table of settings is
/// the one it generates.
@Suite("Configuration: each setting declared once, README's table from the declarations", .offThePool)
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
        "max-list-lines": "10000000", "max-active-lists": "16", "max-add-urls": "10000", "max-queued": "100000", "max-data-bytes": "4MiB",
        "max-queued-bytes": "64MiB",
        "max-queued-share": "25",
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

    /// README.md at the package's root.
    static func readme() throws -> String {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        return try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
    }

    @Test("README's table of settings is the declarations' (names, defaults, what SIGHUP does, help)")
    func readmeTableMatches() throws {
        let lines = try Self.readme().split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let expected = DaemonConfig.settingsMarkdownTable.split(separator: "\n").map(String.init)
        let start = try #require(
            lines.firstIndex(of: expected[0]), "README.md has no table headed \(expected[0]); it should hold:\n\(DaemonConfig.settingsMarkdownTable)")
        let table = Array(lines[start...].prefix { $0.hasPrefix("|") })
        // Cell by cell, so a failure names the setting and the column; then whole, for the text to paste.
        func cells(_ row: String) -> [String] {
            row.split(separator: "|", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
        }
        #expect(table.count == expected.count, "README's table has \(table.count - 2) settings, not \(expected.count - 2)")
        for (found, wanted) in zip(table.dropFirst(2), expected.dropFirst(2)) {
            let (foundCells, wantedCells) = (cells(found), cells(wanted))
            #expect(foundCells.count == wantedCells.count, "\(found)")
            for (column, (have, want)) in zip(["", "setting", "default", "SIGHUP", "what it sets"], zip(foundCells, wantedCells)) {
                #expect(have == want, "\(wantedCells[1]): \(column)")
            }
        }
        #expect(table == expected, "README.md should hold this table:\n\(DaemonConfig.settingsMarkdownTable)")
    }

    @Test("README's synopsis of imgd run names every setting's flag once, and no other but --config")
    func readmeSynopsisMatches() throws {
        let readme = try Self.readme()
        let start = try #require(readme.range(of: "imgd [run] "))
        let end = try #require(readme.range(of: "```", range: start.upperBound..<readme.endIndex))
        let flags = readme[start.lowerBound..<end.lowerBound].split(whereSeparator: \.isWhitespace)
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
