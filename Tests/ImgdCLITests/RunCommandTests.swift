import ArgumentParser
import ImgdTestSupport
@testable import ImgdCLI
import ImgdDaemon
import Testing

/// `imgd run`'s options are the settings table's: one each, named as the setting, with the
/// help and default the table declares, and every flag given reaches the setting of its name.
@Suite("imgd run: its options are the declared settings", .offThePool)
struct RunCommandTests {
    /// `text` with every run of spaces and line breaks as one space (help is wrapped).
    static func collapsed(_ text: String) -> String {
        text.split(whereSeparator: \.isWhitespace).joined(separator: " ")
    }

    @Test("one option per setting, in the table's order, named as the setting; --config besides")
    func optionsMatchTheTable() throws {
        let command = try RunCommand.parse([])
        #expect(RunCommand.settingOptions(of: command).map(\.name) == DaemonConfig.settingNames)
        #expect(command.settingFlags.isEmpty)
    }

    @Test("every flag reaches the setting of its name, in the table's order; a repeated --deny is one list")
    func everyFlagIsGathered() throws {
        // Given in reverse so the order gathered is the table's, not the command line's.
        var arguments: [String] = []
        for name in DaemonConfig.settingNames.reversed() { arguments += ["--\(name)", "text of \(name)"] }
        arguments += ["--deny", "10.0.0.0/8"]
        let flags = try RunCommand.parse(arguments).settingFlags
        #expect(flags.map(\.key) == DaemonConfig.settingNames)
        for flag in flags {
            #expect(flag.value == (flag.key == "deny" ? "text of deny,10.0.0.0/8" : "text of \(flag.key)"))
        }
    }

    @Test("--help lists exactly the settings' flags, each with the declared placeholder, help and default")
    func helpIsTheTables() {
        let help = Self.collapsed(RunCommand.helpMessage(columns: 100_000))
        for setting in DaemonConfig.settings {
            let usage = "--\(setting.name) <\(setting.valueName ?? setting.name)>"
            #expect(help.contains("\(usage) \(setting.help)"), "\(setting.name)")
        }
        // No other flag: the help's "--deny" in deny-defaults' detail is the only mention of one.
        let flags = Set(help.split(separator: " ").filter { $0.hasPrefix("--") }.map { String($0.prefix { $0 != "]" && $0 != ")" }) })
        #expect(flags == Set(DaemonConfig.settingNames.map { "--\($0)" } + ["--config", "--help"]))
    }

    @Test("the discussion names every reloadable setting as applied and every other as needing a restart")
    func discussionListsReloads() throws {
        let text = Self.collapsed(RunCommand.configuration.discussion)
        let applies = try #require(text.range(of: "SIGHUP reloads the file and applies "))
        let restart = try #require(text.range(of: " needs a restart."))
        let clauses = text[applies.upperBound..<restart.lowerBound].split(separator: "; a changed ")
        try #require(clauses.count == 2)
        func names(_ clause: Substring) -> [String] {
            clause.split(whereSeparator: { ", ".contains($0) }).map(String.init).filter { $0 != "and" && $0 != "or" }
        }
        #expect(names(clauses[0]) == DaemonConfig.reloadableSettingNames)
        #expect(names(clauses[1]) == DaemonConfig.restartSettingNames)
    }
}
