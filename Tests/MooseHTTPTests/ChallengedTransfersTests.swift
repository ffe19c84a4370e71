import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import HTTPTypes
import MooseHTTP
import MooseTestSupport
import MooseURLSession
import Synchronization
import Testing

/// A 401 with `WWW-Authenticate: Basic` (a protected download, an upload endpoint refusing the
/// caller) answers every kind of `URLSessionTransport` request at once, as the 401 it is: on Linux,
/// swift-corelibs-foundation turns it into a challenge whose default handling never completes the
/// task, so a download, a transfer upload or a request with a body file ended only at its deadline
/// (or never, for a transfer, which has none of its own).
@Suite(.timeLimit(.minutes(2)))
struct ChallengedTransfersTests {
    /// A loopback server that answers every request with a Basic challenge.
    static func challengingServer() throws -> LoopbackHTTPServer {
        let server = try LoopbackHTTPServer(connectionDeadline: 60)
        server.serve(
            ScriptedTransport { _ in
                var fields = HTTPFields()
                fields[.wwwAuthenticate] = #"Basic realm="files""#
                return APIResponse(status: .unauthorized, headerFields: fields, body: Data("log in first".utf8))
            })
        return server
    }

    /// `body`'s outcome, or a timeout error after `seconds` — without waiting for a `body` that hangs
    /// (the hang this suite is about: the test then fails instead of hanging too).
    static func within<T: Sendable>(_ seconds: Double, _ body: @escaping @Sendable () async throws -> T) async throws
        -> T
    {
        let waiting = Waiting<T>()
        return try await withCheckedThrowingContinuation { continuation in
            waiting.continuation.withLock { $0 = continuation }
            let work = Task {
                let outcome: Result<T, any Error>
                do { outcome = .success(try await body()) } catch { outcome = .failure(error) }
                waiting.continuation.withLock { $0.take() }?.resume(with: outcome)
            }
            Task {
                try? await Task.sleep(nanoseconds: UInt64(seconds * 1e9))
                guard let continuation = waiting.continuation.withLock({ $0.take() }) else { return }
                work.cancel()
                continuation.resume(
                    throwing: HTTPRequestError.timeout(
                        "no answer within \(seconds) s", APIRequest(url: URL(fileURLWithPath: "/"))))
            }
        }
    }

    /// The continuation `within` resumes once, from whichever side ends first.
    final class Waiting<T: Sendable>: Sendable {
        let continuation = Mutex<CheckedContinuation<T, any Error>?>(nil)
    }

    static func temporaryFile(_ contents: String) throws -> URL {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("moose-challenge-\(UUID().uuidString)")
        try Data(contents.utf8).write(to: file)
        return file
    }

    @Test func aDownloadAnsweredWithABasicChallengeEndsAsThe401() async throws {
        let server = try Self.challengingServer()
        defer { server.stop() }
        let transport = URLSessionTransport()
        let destination = FileManager.default.temporaryDirectory.appendingPathComponent("moose-dl-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: destination) }
        let request = APIRequest(url: server.baseURL.appendingPathComponent("file.bin"), timeout: 30)
        let response = try await Self.within(10) {
            try await transport.download(request, to: destination).response
        }
        #expect(response.status == .unauthorized)
        #expect(response.headerFields[.wwwAuthenticate] == #"Basic realm="files""#)
    }

    @Test func aTransferUploadAnsweredWithABasicChallengeEndsAsThe401() async throws {
        let server = try Self.challengingServer()
        defer { server.stop() }
        let transport = URLSessionTransport()
        let file = try Self.temporaryFile("some bytes")
        defer { try? FileManager.default.removeItem(at: file) }
        let request = APIRequest(method: .put, url: server.baseURL.appendingPathComponent("upload"), timeout: 30)
        let response = try await Self.within(10) {
            try await transport.upload(request, fromFile: file).response
        }
        #expect(response.status == .unauthorized)
        #expect(response.headerFields[.wwwAuthenticate] == #"Basic realm="files""#)
    }

    @Test func aRequestWithABodyFileAnsweredWithABasicChallengeEndsAsThe401() async throws {
        let server = try Self.challengingServer()
        defer { server.stop() }
        let transport = URLSessionTransport()
        let file = try Self.temporaryFile("a=b")
        defer { try? FileManager.default.removeItem(at: file) }
        var request = APIRequest(method: .post, url: server.baseURL.appendingPathComponent("form"), timeout: 30)
        request.bodyFile = file
        let sent = request
        let response = try await Self.within(10) { try await transport.send(sent) }
        #expect(response.status == .unauthorized)
        #expect(response.headerFields[.wwwAuthenticate] == #"Basic realm="files""#)
        // The transport still answers afterwards.
        let again = try await Self.within(10) { try await transport.send(sent) }
        #expect(again.status == .unauthorized)
    }
}
