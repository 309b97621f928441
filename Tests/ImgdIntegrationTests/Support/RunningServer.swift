import ImgdTestSupport

/// Runs `body` with a test HTTP server on 127.0.0.1, shutting it down afterwards whatever happens.
func withRunningServer<T: Sendable>(_ body: (TestHTTPServer) async throws -> T) async throws -> T {
    let server = try await TestHTTPServer.start()
    do {
        let value = try await body(server)
        try await server.shutdown()
        return value
    } catch {
        try? await server.shutdown()
        throw error
    }
}
