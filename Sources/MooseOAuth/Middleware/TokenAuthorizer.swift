#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import MooseHTTP
public import HTTPTypes

/// The one rule every Moose authentication middleware follows — `AuthMiddleware` for `APIClient`,
/// `AccessTokenMiddleware` for swift-openapi clients — written once:
///
/// 1. attach the coordinator's current token (`authorizationFields`);
/// 2. send;
/// 3. if the answer rejects that token (`TokenVerdict.rejected`), call `refresh(rejecting:)` with the
///    token the request carried — it refreshes only if that token is still the current one, so N
///    parallel 401s cost one refresh and a 401 for an already replaced token costs none — and send
///    the request **once** more with the new token. Never a loop; `invalid_grant` and the
///    coordinator's refresh window end it with an error.
/// 4. if the body cannot be sent again (`canResend == false`), the token is still refreshed (the
///    caller's next request works) and `OAuthError.tokenRejected` is thrown instead of a resend.
///
/// Proof-of-possession (DPoP, RFC 9449) plugs in at `authorizationFields(for:method:url:)`: it gets
/// the method and URL a proof is bound to, and every adapter asks it for the fields instead of
/// formatting `Bearer …` itself.
///
/// ```swift
/// let authorizer = TokenAuthorizer(coordinator: coordinator)
/// let response = try await authorizer.send(method: .get, url: url, canResend: true,
///                                          verdict: { TokenVerdict($0.head) }) { fields in
///     var request = request
///     for field in fields { request.headerFields[field.name] = field.value }
///     return try await transport.send(request)
/// }
/// ```
public struct TokenAuthorizer: Sendable {
    /// The token source.
    public let coordinator: RefreshCoordinator

    /// An authorizer on `coordinator`.
    public init(coordinator: RefreshCoordinator) { self.coordinator = coordinator }

    /// The header fields that present `token` on a request to `url` with `method`:
    /// `Authorization: <type> <token>` after checking that the token is an RFC 6750 `b64token` and
    /// the type an HTTP token (so nothing a provider sent can break out of the header) — and, for a
    /// DPoP-bound token, a fresh `DPoP` proof for this method and URL (RFC 9449 §7.1, with `ath` and
    /// the nonce `url`'s origin sent last).
    ///
    /// - Throws: `OAuthError.unsafeValue`; `OAuthError.needsLogin` for a DPoP-bound token without its key.
    public func authorizationFields(for token: AccessToken, method: HTTPRequest.Method, url: URL?) throws -> HTTPFields
    {
        guard token.isDPoPBound else {
            var fields = HTTPFields()
            fields[.authorization] = try token.checkedAuthorizationHeader()
            return fields
        }
        guard let url else {
            throw OAuthError(OAuthError.invalidConfiguration, "a DPoP proof needs the request's absolute URL")
        }
        return try token.authorizationFields(method: method, url: url)
    }

    /// Sends through `send` with the current token's fields, applying the rule above. `send` is called
    /// once, or twice after a rejection (or a DPoP server's request for a nonce); `discard` lets go of
    /// a refused response (drain its body) before the second call. `dpopNonce` reads a response's
    /// `DPoP-Nonce`, remembered for `url`'s origin when the token is DPoP-bound. `head` gives a
    /// response's status and header fields, for the `status` and `challenges` of the
    /// `OAuthError.tokenRejected` thrown when the request cannot be sent again.
    public func send<Response>(
        method: HTTPRequest.Method, url: URL?, canResend: Bool,
        verdict: (Response) -> TokenVerdict,
        discard: (Response) async -> Void = { _ in },
        dpopNonce: (Response) -> String? = { _ in nil },
        head: (Response) -> HTTPResponse? = { _ in nil },
        _ send: (HTTPFields) async throws -> Response
    ) async throws -> Response {
        let sent = try await coordinator.accessToken()
        func attempt(_ token: AccessToken) async throws -> Response {
            guard token.isDPoPBound, let url else {
                return try await send(try authorizationFields(for: token, method: method, url: url))
            }
            // A proof that lacked the server's nonce is answered with a new proof, not a new token.
            return try await DPoPNonces.send(
                to: url, canResend: canResend, asksForNonce: { verdict($0) == .useDPoPNonce },
                nonce: dpopNonce, discard: discard
            ) {
                try await send(try authorizationFields(for: token, method: method, url: url))
            }
        }
        let response = try await attempt(sent)
        guard verdict(response) == .rejected else { return response }
        let rejection = head(response)
        await discard(response)
        let fresh = try await coordinator.refresh(rejecting: sent)
        guard canResend else {
            throw OAuthError(
                OAuthError.tokenRejected,
                "the server refused the access token; it was refreshed, but this \(method) request was not sent again because its body can be read only once (a stream): send it again",
                status: rejection?.status.code,
                challenges: rejection.map { AuthenticationChallenge.parse($0.headerFields[values: .wwwAuthenticate]) }
                    ?? [])
        }
        return try await attempt(fresh)
    }
}
