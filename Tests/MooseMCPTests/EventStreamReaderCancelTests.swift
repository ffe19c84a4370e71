#if MooseMCP && canImport(FoundationNetworking)
import Foundation
import FoundationNetworking
@testable import MooseMCP
import MooseTestSupport
import Testing

/// The URL protocol class of the SDK's transport on Linux (`MooseMCPEventStreamReader`) ends each
/// exchange once. swift-corelibs-foundation's `URLSessionTask.cancel()` delivers its own failure through
/// the protocol's client after `stopLoading()`; a protocol that had already delivered its answer (or
/// delivered it after the cancellation) made `URLSession.data(for:)` resume its continuation twice,
/// which traps: it killed CI's whole test run on 2026-11-29, when an MCP client disconnected.
struct EventStreamReaderCancelTests {
    static let base: URL = URL(string: "http://127.0.0.1:\(LocalServer.start("tools/testserver/http_test_server.py"))")!

    @Test func aPOSTCancelledAsItEndsEndsOnce() async throws {
        let session = URLSession(configuration: MooseMCPEventStreamReader.sessionConfiguration())
        var request = URLRequest(url: Self.base.appendingPathComponent("echo"))
        request.httpMethod = "POST"
        request.httpBody = Data("{}".utf8)
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        var answered = 0
        for round in 0..<300 {
            let task = Task { try? await session.data(for: request) }
            // Cancelled at a spread of moments around the answer (a local exchange takes about a millisecond).
            try await Task.sleep(nanoseconds: UInt64(round % 30) * 100_000)
            task.cancel()
            if await task.value != nil { answered += 1 }
        }
        // The race was run: some exchanges ended before their cancellation, and the process is alive.
        #expect(answered > 0)
    }
}
#endif
