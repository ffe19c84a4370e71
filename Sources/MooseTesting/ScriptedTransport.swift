#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
public import MooseHTTP
import Synchronization
public import HTTPTypes

/// An `HTTPTransport` for tests: answers every request from a closure (or from a queue of canned
/// responses) and records what was sent — for exercising an app's Moose code without a network.
/// For a real server with injected faults, wrap the real transport instead (the closure can call it).
///
/// ```swift
/// let transport = ScriptedTransport { request in
///     (request.url?.path ?? "").hasSuffix("/token")
///         ? .json(#"{"access_token":"at","token_type":"Bearer","expires_in":60}"#)
///         : APIResponse(status: 404)
/// }
/// … run the code under test …
/// #expect(transport.requests.count == 1)
/// ```
public final class ScriptedTransport: HTTPTransport, Sendable {
    private let answer: @Sendable (APIRequest) async throws -> APIResponse
    private let recorded = Mutex<[APIRequest]>([])

    /// A transport answering with `answer`.
    public init(_ answer: @escaping @Sendable (APIRequest) async throws -> APIResponse) { self.answer = answer }

    /// A transport answering with `responses` in order (then 599 "script exhausted").
    public convenience init(responses: [APIResponse]) {
        let queue = Mutex(responses)
        self.init { _ in
            queue.withLock {
                $0.isEmpty ? APIResponse(status: 599, body: Data("script exhausted".utf8)) : $0.removeFirst()
            }
        }
    }

    /// Every request sent so far, in order.
    public var requests: [APIRequest] { recorded.withLock { $0 } }

    public func send(_ request: APIRequest) async throws -> APIResponse {
        recorded.withLock { $0.append(request) }
        return try await answer(request)
    }
}

extension APIResponse {
    /// A JSON response (`Content-Type: application/json`) for scripted transports.
    public static func json(_ text: String, status: HTTPResponse.Status = .ok, headerFields: HTTPFields = [:])
        -> APIResponse
    {
        var headers = headerFields
        headers[.contentType] = "application/json"
        return APIResponse(status: status, headerFields: headers, body: Data(text.utf8))
    }
}
