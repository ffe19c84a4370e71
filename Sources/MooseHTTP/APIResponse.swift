#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import HTTPTypes

/// A response as Moose receives it: swift-http-types' `HTTPResponse` (status, header fields) and
/// the body, read whole (bounded by the transport's size limit).
///
/// ```swift
/// let response = try await transport.send(request)
/// if response.status.kind == .successful, let type = response.headerFields[.contentType] { … }
/// ```
public struct APIResponse: Sendable {
    /// The status and header fields.
    public var head: HTTPResponse
    /// The body.
    public var body: Data

    /// A response (tests, scripted transports).
    public init(status: HTTPResponse.Status, headerFields: HTTPFields = [:], body: Data = Data()) {
        head = HTTPResponse(status: status, headerFields: headerFields)
        self.body = body
    }

    /// A response from a swift-http-types head.
    public init(head: HTTPResponse, body: Data = Data()) {
        self.head = head
        self.body = body
    }

    /// The status.
    public var status: HTTPResponse.Status {
        get { head.status }
        set { head.status = newValue }
    }

    /// The header fields.
    public var headerFields: HTTPFields {
        get { head.headerFields }
        set { head.headerFields = newValue }
    }

    /// A status from a code that came from outside (a transport, a C library), bounded first:
    /// swift-http-types traps on codes outside 0…999, and a status line is hostile input.
    public static func status(code: Int) -> HTTPResponse.Status? {
        (100...999).contains(code) ? HTTPResponse.Status(code: code) : nil
    }
}
