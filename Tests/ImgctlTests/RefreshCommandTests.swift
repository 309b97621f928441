import ImgdProtocol
import ImgdTestSupport
import Testing

@testable import ImgctlCLI

/// `imgctl refresh` against a scripted server answering with the recorded `refresh` reply.
@Suite("imgctl refresh", .timeLimit(.minutes(5)), .offThePool)
struct RefreshCommandTests {
    typealias Server = ScriptedControlServer

    @Test("URLs or --list go out as the daemon takes them; the counts are printed; neither or both is bad usage")
    func requestsAndOutput() throws {
        let reply = RecordedReply.value(
            "refresh", replacing: ["revalidated": .int(1200), "replaced": .int(1), "failed": .int(0), "not_cached": .int(2)]
        ).jsonText
        let server = try Server { request in [.line(Server.success(request.id, reply))] }
        defer { server.stop() }
        let byURL = ImgctlRun(["refresh", "--socket", server.path, "http://a.test/x.png", "http://a.test/y.png"])
        #expect(byURL.status == 0)
        #expect(byURL.stdout.text == "1,200 revalidated, 1 replaced, 0 failed, 2 not cached\n")
        let byList = ImgctlRun(["refresh", "--socket", server.path, "--list", "a.txt"])
        #expect(byList.status == 0)
        #expect(
            server.received.map(\.raw) == [
                #"{"cmd":"refresh","id":1,"urls":["http://a.test/x.png","http://a.test/y.png"]}"#,
                #"{"cmd":"refresh","id":1,"list":"a.txt"}"#,
            ])
        #expect(ImgctlRun(["refresh", "--socket", server.path]).status == 2)
        #expect(ImgctlRun(["refresh", "--socket", server.path, "--list", "a.txt", "http://a.test/x.png"]).status == 2)
    }
}
