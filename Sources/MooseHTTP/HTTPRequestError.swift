#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
public import HTTPTypes

/// The one error type of `MooseHTTP`.
public struct HTTPRequestError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure this is.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        let name: String
        /// The code's name.
        public var description: String { name }

        /// Lets a `catch` clause match on a code.
        public static func ~= (code: Self, error: any Error) -> Bool { (error as? HTTPRequestError)?.code == code }
    }

    /// What kind of failure this is.
    public let code: Code
    /// A human-readable explanation (URLs have their query redacted).
    public let message: String
    /// The request's method, when known.
    public let method: HTTPRequest.Method?
    /// The request's URL with secrets in the query redacted, when known.
    public let url: String?
    /// The response status, for `status` errors.
    public let status: HTTPResponse.Status?
    /// The start of the response body (at most 512 characters), for `status` errors.
    public let bodyExcerpt: String?

    package init(
        _ code: Code, _ message: String, method: HTTPRequest.Method? = nil, url: String? = nil,
        status: HTTPResponse.Status? = nil,
        bodyExcerpt: String? = nil
    ) {
        self.code = code
        self.message = message
        self.method = method
        self.url = url
        self.status = status
        self.bodyExcerpt = bodyExcerpt
    }

    /// `code: message`, with method, URL and status when known.
    public var description: String {
        var text = "\(code): \(message)"
        if let method, let url { text += " [\(method) \(url)]" }
        return text
    }

    /// A transport failure for `request` (for transports in other modules).
    public static func transportFailure(_ message: String, _ request: APIRequest) -> HTTPRequestError {
        HTTPRequestError(transport, message, method: request.method, url: request.redactedURL)
    }

    /// A timeout for `request` (for transports in other modules).
    public static func timeout(_ message: String, _ request: APIRequest) -> HTTPRequestError {
        HTTPRequestError(timedOut, message, method: request.method, url: request.redactedURL)
    }

    /// The server answered with a status the caller did not accept (and no server-error mapper claimed it).
    public static let status = Code(name: "status")
    /// The response body could not be decoded as the expected type.
    public static let decoding = Code(name: "decoding")

    /// The request could not be sent or no response arrived (DNS, connect, TLS, reset).
    public static let transport = Code(name: "transport")
    /// The TLS handshake failed or the server's certificate is not trusted (an unknown or private CA,
    /// an expired certificate, another host's name): retrying does not help; trusting the right CA
    /// (`CurlTransport.caFile`, `SSL_CERT_FILE`) or fixing the server's certificate does.
    /// A server's key matching none of its host's `PublicKeyPins` is a `tls` error too, whose message
    /// says so ("the server's public key for HOST is not one of the pinned keys …").
    public static let tls = Code(name: "tls")
    /// Public-key pins that cannot be used: a malformed pin or host (`PublicKeyPins.init`), or pins
    /// given to a transport that cannot check them on this platform. Nothing was sent.
    public static let pinning = Code(name: "pinning")
    /// An `https` request reached a server that does not speak TLS (it answered the handshake in
    /// plain text: a plain-http port, or the wrong scheme in the URL). Trusting another CA does not
    /// help; the URL's scheme or port is wrong. (`CurlTransport`; other transports report `tls`.)
    public static let notTLS = Code(name: "notTLS")
    /// The host's name did not resolve (DNS): a misspelt or unknown host, or no name service on this
    /// network. (`CurlTransport`; other transports report `transport`.)
    public static let nameNotResolved = Code(name: "nameNotResolved")
    /// The exchange took longer than its timeout.
    public static let timedOut = Code(name: "timedOut")
    /// The response was larger than allowed.
    public static let responseTooLarge = Code(name: "responseTooLarge")
    /// The network is unreachable (the client's `Reachability` says offline): nothing was sent.
    public static let offline = Code(name: "offline")
    /// The request is malformed (bad URL, unsupported scheme).
    public static let invalidRequest = Code(name: "invalidRequest")
}
