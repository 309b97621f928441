import ArgumentParser
import ImgdProtocol
import ImgdTestSupport
import Testing

@testable import ImgctlCLI

#if canImport(Glibc)
import Glibc
#endif

/// Exit statuses: usage 2 (not swift-argument-parser's 64), daemon error 1, unreachable 3, help 0.
@Suite("Exit statuses", .timeLimit(.minutes(5)), .offThePool)
struct ExitStatusTests {
    /// The error parseAsRoot throws for `arguments`, or the one the parsed command throws when
    /// it is not one of ours (`--help` parses into swift-argument-parser's own help command,
    /// which throws when run); nil when they parse into a subcommand of ours.
    func parseError(_ arguments: [String]) -> (any Error)? {
        do {
            var command = try ImgctlCommand.parseAsRoot(arguments)
            if !(command is any ImgctlSubcommand) { try command.run() }
            return nil
        } catch {
            return error
        }
    }

    @Test("parser errors map to 2, not 64")
    func parserErrorsMapToUsage() throws {
        for arguments in [["purge"], ["purge", "--memory", "--disk"], ["frobnicate"], ["status", "--bogus"], ["get"],
            ["cancel"], ["cancel", "http://a/b.png", "--list", "x"], ["add"], ["add", "--priority", "urgent", "http://a/b"],
            ["add", "--pin", "3x", "http://a/b"], ["get", "-o", "-", "--json", "http://a/b"], ["stats", "--prometheus", "--json"],
            ["warm"], ["evict"], ["retry", "http://a/b", "--list", "x"],
        ] {
            let error = try #require(parseError(arguments), "\(arguments) should not parse")
            #expect(ImgctlCommand.exitCode(for: error) == .validationFailure, "\(arguments)")
            let exit = ImgctlExit.forError(error)
            #expect(exit.status == 2, "\(arguments)")
            #expect(exit.standardOutput == nil)
            #expect(exit.standardError?.contains("Usage: imgctl") == true, "\(arguments)")
        }
    }

    @Test("ExitCode.validationFailure (64) is mapped to 2")
    func validationFailureIsTwo() {
        #expect(ExitCode.validationFailure.rawValue == 64)
        #expect(ImgctlExit.forError(ExitCode.validationFailure).status == 2)
        #expect(ImgctlExit.forError(ValidationError("nope")).status == 2)
    }

    @Test("--help and --version exit 0 with their text on stdout")
    func helpIsSuccess() throws {
        let help = ImgctlExit.forError(try #require(parseError(["--help"])))
        #expect(help.status == 0)
        #expect(help.standardOutput?.contains("USAGE: imgctl <subcommand>") == true)
        #expect(help.standardError == nil)
        let subcommandHelp = ImgctlExit.forError(try #require(parseError(["warm", "--help"])))
        #expect(subcommandHelp.status == 0)
        #expect(subcommandHelp.standardOutput?.contains("--wait") == true)
        let version = ImgctlExit.forError(try #require(parseError(["--version"])))
        #expect(version.status == 0)
        let completion = ImgctlExit.forError(try #require(parseError(["--generate-completion-script", "bash"])))
        #expect(completion.status == 0)
        #expect(completion.standardOutput?.contains("_imgctl") == true)
    }

    @Test("imgctl's own failures: 1 for the daemon's errors, 3 for an unreachable daemon")
    func ownErrors() {
        let daemon = ImgctlExit.forError(ImgctlError.daemon(code: "not_found", message: "not cached"))
        #expect(daemon == ImgctlExit(status: 1, standardError: "imgctl: not_found: not cached"))
        let unreachable = ImgctlExit.forError(
            ImgctlError.unreachable(socket: "/x.sock", reason: "Connection refused", errno: ECONNREFUSED))
        #expect(unreachable.status == 3)
        #expect(
            unreachable.standardError
                == "imgctl: cannot reach imgd at /x.sock: Connection refused (is imgd running? set --socket or IMGD_SOCKET)")
        #expect(ImgctlExit.forError(ImgctlError.connectionLost(socket: "/x.sock")).status == 3)
        #expect(ImgctlExit.forError(ImgctlError.badReply("x")).status == 1)
        #expect(ImgctlExit.forError(ImgctlError.reported(status: 1)) == ImgctlExit(status: 1))
    }

    @Test("running: usage errors exit 2 with the message on stderr, help exits 0 on stdout")
    func runMapsStatuses() {
        let purge = ImgctlRun(["purge"])
        #expect(purge.status == 2)
        #expect(purge.stderr.text.contains("Give exactly one of --memory and --disk."))
        #expect(purge.stdout.text.isEmpty)
        #expect(ImgctlRun([]).status == 2)
        #expect(ImgctlRun(["status", "--bogus"]).status == 2)
        let help = ImgctlRun(["--help"])
        #expect(help.status == 0)
        #expect(help.stdout.text.contains("Exit status: 0 success"))
        #expect(help.stderr.text.isEmpty)
    }

    @Test("fsck: sends fsck, prints the counts; exits 0 when all was intact, 1 when bad entries were removed")
    func fsck() throws {
        for (bad, status) in [(0, Int32(0)), (2, Int32(1))] {
            let server = try ScriptedControlServer { request in
                [
                    .line(
                        ScriptedControlServer.success(
                            request.id,
                            RecordedReply.value("fsck", replacing: ["checked": .int(40), "bad": JSONValue(bad), "removed": JSONValue(bad)]).jsonText))
                ]
            }
            defer { server.stop() }
            let run = ImgctlRun(["fsck", "--socket", server.path])
            #expect(run.status == status, "\(run.stderr.text)")
            #expect(run.stdout.text == "checked 40 entries: \(bad) bad, \(bad) removed\n")
            #expect(server.received.map(\.raw) == [#"{"cmd":"fsck","id":1}"#])
        }
    }

    @Test("arguments parse into the request's fields")
    func parsing() throws {
        let add = try #require(
            try ImgctlCommand.parseAsRoot(["add", "--priority", "high", "--pin", "24h", "http://a/1", "http://a/2"])
                as? AddCommand)
        #expect(add.priority == .high)
        #expect(add.pin == "24h")
        #expect(add.urls == ["http://a/1", "http://a/2"])
        let watch = try #require(try ImgctlCommand.parseAsRoot(["watch", "--events", "fetched, failed,"]) as? WatchCommand)
        #expect(watch.events == ["fetched", "failed"])
        let get = try #require(try ImgctlCommand.parseAsRoot(["get", "--no-fetch", "-o", "x.png", "http://a/1"]) as? GetCommand)
        #expect(get.fetch == false)
        #expect(get.output == "x.png")
        let purge = try #require(try ImgctlCommand.parseAsRoot(["purge", "--disk", "--socket", "/s"]) as? PurgeCommand)
        #expect(purge.tier == .disk)
        #expect(purge.connection.socket == "/s")
    }
}
