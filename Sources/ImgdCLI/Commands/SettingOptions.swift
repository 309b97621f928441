import ArgumentParser

/// A command whose options are settings of ``DaemonConfig/settings`` (`imgd run`, `imgd
/// prefetch`): each a `String?` (a `[String]` when repeatable) named as its setting, with
/// `.setting(name)` as its help, so the setting's own parser (``DaemonConfig/apply(flags:)``)
/// reads the text, with its ranges and minima, as it reads the file's. The options are found
/// by reflection, so no list of names is written twice.
protocol SettingOptions: ParsableArguments {
    /// The stored properties that are not settings, by their labels (`_config`, `_lists`).
    static var otherOptions: Set<String> { get }
}

extension SettingOptions {
    /// The setting each option gives, by the option's flag name (`maxAddUrls` is
    /// `max-add-urls`, as swift-argument-parser names it), in declaration order.
    static func settingOptions(of command: Self) -> [(name: String, value: Any)] {
        Mirror(reflecting: command).children.compactMap { child in
            guard let label = child.label, !otherOptions.contains(label) else { return nil }
            var name = ""
            for character in label.dropFirst() {
                if character.isUppercase { name += "-" }
                name += character.lowercased()
            }
            return (name, child.value)
        }
    }

    /// The settings given as flags, name and text, in declaration order (the order of
    /// ``DaemonConfig/settings``); a repeated `--deny` is one comma-separated text.
    var settingFlags: [(key: String, value: String)] {
        Self.settingOptions(of: self).compactMap { option in
            switch option.value {
            case let single as Option<String?>:
                single.wrappedValue.map { (option.name, $0) }
            case let repeated as Option<[String]>:
                repeated.wrappedValue.isEmpty ? nil : (option.name, repeated.wrappedValue.joined(separator: ","))
            default:
                preconditionFailure("--\(option.name) is neither a String? nor a [String] option")
            }
        }
    }
}
