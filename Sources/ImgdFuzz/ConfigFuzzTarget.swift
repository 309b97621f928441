import ImgdDaemon

/// Loads the input as `imgd --config FILE` does (the file read, the TOML parser, every setting
/// it names), or, for some inputs, as `--key value` flags one a line. Requires that loading is
/// deterministic (a second load of the same bytes gives the same settings or the same error),
/// since `SIGHUP` compares a reloaded configuration with the running one, and that every error
/// says where it came from.
enum ConfigFuzzTarget {
    static func run(_ input: inout FuzzInput) throws(FuzzFinding) {
        let asFlags = input.byte() >= 224
        let payload = input.payload
        var file: String?
        var scratch: ScratchFile?
        var flags: [(key: String, value: String)] = []
        if asFlags {
            for line in String(decoding: payload, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false) {
                let parts = line.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                flags.append((String(parts[0]), parts.count > 1 ? String(parts[1]) : ""))
            }
        } else {
            scratch = ScratchFile(holding: payload)
            file = scratch?.path
        }
        // The path is used below without the object: keep the file open until the end.
        defer { withExtendedLifetime(scratch) {} }
        let first = load(file: file, flags: flags)
        let second = load(file: file, flags: flags)
        guard first == second else {
            throw FuzzFinding(target: "config", "two loads of the same input differ: \(first) / \(second)")
        }
        if case .failure(let error) = first, error.origin.isEmpty || error.reason.isEmpty {
            throw FuzzFinding(target: "config", "an error without its origin or reason: \(error)")
        }
    }

    private static func load(file: String?, flags: [(key: String, value: String)]) -> Result<DaemonConfig, ConfigError> {
        do throws(ConfigError) {
            return .success(try DaemonConfig.load(environment: [:], file: file, flags: flags))
        } catch {
            return .failure(error)
        }
    }
}
