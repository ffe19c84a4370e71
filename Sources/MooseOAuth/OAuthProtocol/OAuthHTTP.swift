#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import MooseHTTP
import Logging

/// The one way MooseOAuth talks HTTP: every discovery, token, revocation, device, JWKS and UserInfo
/// request goes through MooseHTTP's `APIClient` — its enforced timeout, its redacted logging (form
/// secrets, `Authorization`, query values never logged) — without retries (the coordinator decides
/// those, knowing what a refresh token is) and with one error mapping: a transport failure or timeout
/// is `OAuthError.transient` (a name that did not resolve too: the error's `underlying` says which), a
/// failed TLS handshake or certificate check `OAuthError.tls` (a server that does not speak TLS too).
enum OAuthHTTP {
    static let context = HTTPMiddlewareContext(isRetryable: false, requiresAuthentication: false)

    /// Sends `request`; the response comes back whatever its status. `what` names the endpoint in errors.
    static func send(_ request: APIRequest, over transport: any HTTPTransport, logger: Logger?, what: String)
        async throws -> APIResponse
    {
        do {
            return try await APIClient(transport: transport, retryPolicy: .none, logger: logger).send(
                request, context: context)
        } catch let error as HTTPRequestError where error.code == HTTPRequestError.notTLS {
            // Not a certificate problem: https to a port that speaks plain http.
            throw OAuthError(
                OAuthError.tls, "\(what): \(error.message); is the URL's scheme (https) or port wrong?",
                underlying: error)
        } catch let error as HTTPRequestError where error.code == HTTPRequestError.tls {
            throw OAuthError(OAuthError.tls, "\(what): the TLS connection failed (\(error.message))", underlying: error)
        } catch let error as HTTPRequestError {
            throw OAuthError(OAuthError.transient, "\(what) is unreachable: \(error.message)", underlying: error)
        }
    }
}
