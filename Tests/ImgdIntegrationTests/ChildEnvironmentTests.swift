import ImgdTestSupport
import Testing

@Suite("The environment of the daemons and clients the tests start")
struct ChildEnvironmentTests {
    @Test("every service variable is scrubbed unless the test sets it; the rest is inherited")
    func scrubbed() {
        let clean = DaemonProcess.environment()
        for name in DaemonProcess.serviceVariables {
            #expect(clean[name] == nil, "\(name) reaches the child")
        }
        #expect(clean["PATH"] != nil)
        let set = DaemonProcess.environment(adding: ["NOTIFY_SOCKET": "/run/n", "STATE_DIRECTORY": "/s"])
        #expect(set["NOTIFY_SOCKET"] == "/run/n" && set["STATE_DIRECTORY"] == "/s" && set["LISTEN_FDS"] == nil)
        #expect(BinaryRunner.imgctlEnvironment == clean)
    }
}
