import ImgdDaemon
import ImgdProtocol
import ImgdTestSupport
import Testing

@Suite("Control socket: requests' arguments and errors", .timeLimit(.minutes(5)), .offThePool)
struct ControlRequestTests {
    private func request(_ arguments: [String: JSONValue]) -> ControlRequest {
        ControlRequest(id: 1, command: "test", arguments: arguments)
    }

    @Test("a required string: present, missing, null, of the wrong type")
    func strings() throws {
        #expect(try request(["url": "http://a"]).string("url") == "http://a")
        #expect(throws: ControlError.invalidArgument(field: "url", reason: "is required")) {
            try request([:]).string("url")
        }
        #expect(throws: ControlError.invalidArgument(field: "url", reason: "is required")) {
            try request(["url": nil]).string("url")
        }
        #expect(throws: ControlError.invalidArgument(field: "url", reason: "must be a string, not a number")) {
            try request(["url": 3]).string("url")
        }
        #expect(try request([:]).optionalString("url") == nil)
    }

    @Test("booleans, integers and choices")
    func scalars() throws {
        #expect(try request([:]).bool("fetch", default: true) == true)
        #expect(try request(["fetch": false]).bool("fetch", default: true) == false)
        #expect(throws: ControlError.invalidArgument(field: "fetch", reason: "must be true or false, not a string")) {
            try request(["fetch": "no"]).bool("fetch", default: true)
        }
        #expect(try request(["n": 5]).int("n", in: 1...10) == 5)
        #expect(try request(["n": 5.0]).int("n") == 5)
        #expect(try request([:]).int("n", default: 7) == 7)
        #expect(throws: ControlError.invalidArgument(field: "n", reason: "must be between 1 and 10, not 11")) {
            try request(["n": 11]).int("n", in: 1...10)
        }
        #expect(throws: ControlError.invalidArgument(field: "n", reason: "must be an integer, not a number")) {
            try request(["n": 1.5]).int("n")
        }
        #expect(try request(["priority": "high"]).choice("priority", of: ["high", "normal"], default: "normal") == "high")
        #expect(try request([:]).choice("priority", of: ["high", "normal"], default: "normal") == "normal")
        #expect(throws: ControlError.invalidArgument(field: "priority", reason: "must be one of \"high\", \"normal\", not \"low\"")) {
            try request(["priority": "low"]).choice("priority", of: ["high", "normal"], default: "normal")
        }
    }

    @Test("arrays of strings: non-empty, strings only")
    func stringArrays() throws {
        #expect(try request(["urls": ["a", "b"]]).strings("urls") == ["a", "b"])
        #expect(throws: ControlError.invalidArgument(field: "urls", reason: "must not be empty")) {
            try request(["urls": []]).strings("urls")
        }
        #expect(throws: ControlError.invalidArgument(field: "urls", reason: "element 1 must be a string, not null")) {
            try request(["urls": ["a", nil]]).strings("urls")
        }
        #expect(throws: ControlError.invalidArgument(field: "urls", reason: "must be an array of strings, not a string")) {
            try request(["urls": "a"]).strings("urls")
        }
        #expect(throws: ControlError.invalidArgument(field: "urls", reason: "is required")) {
            try request([:]).strings("urls")
        }
        #expect(try request([:]).optionalStrings("urls") == nil)
    }

    @Test("error codes are the protocol's; the message names the field")
    func errorCodes() {
        let cases: [(ControlError, String)] = [
            (.badRequest("x"), "bad_request"),
            (.lineTooLong(limit: 1), "line_too_long"),
            (.unknownCommand("frobnicate"), "unknown_command"),
            (.invalidArgument(field: "url", reason: "is required"), "invalid_argument"),
            (.tooManyRequests(limit: 64), "too_many_requests"),
            (.busy(limit: 256), "busy"),
            (.shuttingDown, "shutting_down"),
            (.notFound("no list \"a\""), "not_found"),
            (.other(code: "http_404", message: "404"), "http_404"),
        ]
        for (error, code) in cases {
            #expect(error.code == code)
        }
        #expect(ControlError.invalidArgument(field: "url", reason: "is required").message == "invalid argument \"url\": is required")
        #expect(ControlError.unknownCommand("frobnicate").message == "unknown command \"frobnicate\"; see Protocol.md")
    }
}
