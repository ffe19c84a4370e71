#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import MooseHTTP
import MooseJWT

/// The device authorization grant (RFC 8628): for devices without a browser, and terminals.
///
/// ```swift
/// let flow = DeviceAuthorizationFlow(client: client, idTokens: validator) { device in
///     print("Go to \(device.verificationURI) and enter \(device.userCode)")
/// }
/// let tokens = try await flow.authorize(AuthorizationParameters(scopes: ["openid"]))
/// ```
public struct DeviceAuthorizationFlow: OAuthClientFlow {
    /// The client (its metadata must have a device authorization endpoint, discovered or configured).
    public let client: OAuthClient
    /// Validates ID tokens when `openid` is requested.
    public let idTokens: IDTokenValidator?
    /// Shows the user what to do.
    public let present: @Sendable (DeviceAuthorization) async -> Void
    /// Waits between polls (injectable for tests).
    public var sleep: @Sendable (TimeInterval) async throws -> Void = { seconds in
        try await Task.sleep(nanoseconds: UInt64(max(0, seconds) * 1_000_000_000))
    }

    /// A flow.
    ///
    /// - Parameters:
    ///   - client: the client; its metadata must have a device authorization endpoint.
    ///   - idTokens: validates an ID token that comes back when `openid` is asked for; `nil`: none is
    ///     validated (the device grant may return none).
    ///   - present: shows the user code and verification URL; called once, before polling starts.
    public init(
        client: OAuthClient, idTokens: IDTokenValidator?,
        present: @escaping @Sendable (DeviceAuthorization) async -> Void
    ) {
        self.client = client
        self.idTokens = idTokens
        self.present = present
    }

    /// Requests the codes (RFC 8628 §3.1).
    ///
    /// - Parameter parameters: the scopes, RFC 8707 resources (none: the client's `resource`) and
    ///   extra parameters sent to the device authorization endpoint.
    /// - Returns: the device and user codes, the verification URL, and the expiry (at most an hour) and
    ///   polling interval (1–60 s) as bounded here.
    /// - Throws: `OAuthError` with `missingEndpoint` or `insecureEndpoint` (no usable device
    ///   authorization endpoint); the endpoint's refusal (`invalidClient`, `server`…, `transient` for
    ///   5xx or 429); `invalidResponse` when a code or the verification URL is missing; `transient`
    ///   or `tls` when it cannot be reached.
    public func start(_ parameters: AuthorizationParameters) async throws -> DeviceAuthorization {
        let url = try client.metadata.require(
            client.metadata.deviceAuthorizationEndpoint, "device authorization endpoint")
        let request = try client.tokenEndpoint().authenticatedRequest(
            url: url,
            parameters: [("scope", parameters.scopes.joined(separator: " "))]
                + parameters.resources(for: client).map { ("resource", $0) } + parameters.extra)
        let response = try await OAuthHTTP.send(
            request, over: client.transport, logger: client.logger,
            what: "the device authorization endpoint")
        let object = try? JSONValue(parsing: Array(response.body))
        guard response.status.code == 200, case .object(let fields)? = object else {
            throw TokenResponse.error(
                from: response, object: object, endpoint: "the device authorization endpoint",
                publicClient: client.authentication.isNone)
        }
        guard let deviceCode = fields["device_code"]?.stringValue, let userCode = fields["user_code"]?.stringValue,
            // "_url": Google's spelling
            let uriText = (fields["verification_uri"] ?? fields["verification_url"])?.stringValue,
            let uri = URL(string: uriText)
        else {
            throw OAuthError(
                OAuthError.invalidResponse,
                "the device authorization response lacks device_code, user_code or verification_uri")
        }
        let now = client.clock()
        // Bounded before use (RFC 8628 says nothing of limits): the code lives at most an hour, and
        // polling waits 1–60 s between requests, whatever the server says (1e300 included).
        let expiresIn = min(max(fields["expires_in"]?.doubleValue ?? 600, 0), DeviceAuthorization.maximumLifetime)
        let interval = fields["interval"]?.doubleValue ?? 5
        return DeviceAuthorization(
            deviceCode: deviceCode, userCode: userCode, verificationURI: uri,
            verificationURIComplete: fields["verification_uri_complete"]?.stringValue.flatMap(URL.init(string:)),
            expiresAt: now.addingTimeInterval(expiresIn.isNaN ? 600 : expiresIn),
            interval: interval.isNaN ? 5 : min(max(interval, 1), DeviceAuthorization.maximumInterval))
    }

    /// Polls the token endpoint until the user decides (RFC 8628 §3.4–3.5): `authorization_pending`
    /// waits, `slow_down` adds 5 s to the interval, `access_denied` and `expired_token` end it.
    ///
    /// `resources` (RFC 8707) are named again on every poll, as on the device authorization request.
    ///
    /// - Parameters:
    ///   - device: what `start(_:)` returned; polling stops at its `expiresAt`.
    ///   - scopes: the scopes asked for, kept as the granted ones when the response names none.
    ///   - resources: the RFC 8707 resources; default: none.
    /// - Returns: the tokens, bound to a new DPoP key when the client asks for DPoP; not validated here.
    /// - Throws: `OAuthError` with `accessDenied` (the user refused), `expiredToken` (the code expired
    ///   first), the token endpoint's other refusals (`invalidGrant`, `invalidClient`, `server`…),
    ///   `invalidResponse`, `unsafeValue`, `tls`; transient failures are retried until the expiry.
    ///   `CancellationError` from `sleep` when the task is cancelled.
    public func poll(_ device: DeviceAuthorization, scopes: [String], resources: [String] = []) async throws -> TokenSet
    {
        var interval = device.interval
        let endpoint = try client.tokenEndpoint()
        let dpop = try client.newDPoPKey()
        while true {
            // Never sleep past the code's expiry: an interval longer than the code's life wakes at
            // expiry and says so, instead of a poll a minute after the code died.
            let remaining = device.expiresAt.timeIntervalSince(client.clock())
            try await sleep(max(0, min(interval, remaining)))
            guard client.clock() < device.expiresAt else {
                throw OAuthError(OAuthError.expiredToken, "the user code expired before it was approved")
            }
            do {
                var tokens = try await endpoint.request(
                    [("grant_type", "urn:ietf:params:oauth:grant-type:device_code"), ("device_code", device.deviceCode)]
                        + resources.map { ("resource", $0) },
                    requestedScopes: scopes, dpop: dpop)
                if resources.count == 1 { tokens.resource = resources[0] }
                return tokens
            } catch let error as OAuthError {
                switch error.oauthError {
                case "authorization_pending": continue
                case "slow_down": interval = min(interval + 5, DeviceAuthorization.maximumInterval)
                case "access_denied":
                    throw OAuthError(
                        OAuthError.accessDenied, "the user denied the request", oauthError: "access_denied")
                case "expired_token":
                    throw OAuthError(OAuthError.expiredToken, "the user code expired", oauthError: "expired_token")
                default:
                    if error.code == OAuthError.transient { continue } // the server hiccuped: keep polling until expiry
                    throw error
                }
            }
        }
    }

    /// Runs the whole grant: `start(_:)`, `present`, `poll(_:scopes:resources:)`, then validates
    /// an ID token with `idTokens` when `openid` was asked for and one came back.
    ///
    /// - Parameter parameters: as for `start(_:)`.
    /// - Returns: the tokens.
    /// - Throws: the errors of `start(_:)` and `poll(_:scopes:resources:)`; `OAuthError.invalidIDToken`
    ///   for an ID token that fails validation.
    public func authorize(_ parameters: AuthorizationParameters) async throws -> TokenSet {
        let device = try await start(parameters)
        await present(device)
        let tokens = try await poll(device, scopes: parameters.scopes, resources: parameters.resources(for: client))
        if parameters.scopes.contains("openid"), let idToken = tokens.idToken, let idTokens {
            try await idTokens.validate(
                idToken, nonce: nil, accessToken: tokens.accessToken, serverClockOffset: tokens.serverClockOffset)
        }
        return tokens
    }

    /// A refreshed ID token is validated the way the code flow does (OIDC Core §12.2).
    public var refreshIDTokens: IDTokenValidator? { idTokens }

    /// Only a person renews a session without a refresh token: log in again.
    public func renewalParameters(for tokens: TokenSet) -> AuthorizationParameters? { nil }
}
