import Foundation
import MooseCrypto
import MooseHTTP
import MooseJWT
@testable import MooseResourceServer
import Testing

/// RFC 9068 access tokens and RFC 6750 Bearer answers.
@Suite struct AccessTokenTests {
    let harness: Harness
    init() throws { harness = try Harness() }

    @Test func aValidTokenGivesTheVerifiedPrincipal() async throws {
        let token = try harness.token(["authorization_details": .array([.object(["type": "payment"])])])
        let principal = try await harness.server().verify(
            authorizationHeader: "Bearer \(token)", dpopHeader: nil, method: "GET",
            url: Harness.url, requiredScopes: ["api.read"])
        #expect(principal.subject == "alice" && principal.clientID == "moose-app" && principal.issuer == Harness.issuer)
        #expect(principal.scopes == ["api.read", "profile"] && principal.scheme == .bearer)
        #expect(principal.confirmationThumbprint == nil && principal.tokenID == "token-1")
        #expect(principal.authorizationDetails?.arrayValue?.first?["type"]?.stringValue == "payment")
        // The scheme is case-insensitive (RFC 9110 §11.1).
        _ = try await harness.server().verify(
            authorizationHeader: "bearer  \(token)", dpopHeader: nil, method: "GET", url: Harness.url)
    }

    @Test func noCredentialsGetBareChallengesForBothSchemes() async throws {
        let refused = try #require(
            try await refusal {
                try await harness.server().verify(
                    authorizationHeader: nil, dpopHeader: nil,
                    method: "GET", url: Harness.url)
            })
        #expect(refused.code == ResourceServerRefusal.missingCredentials && refused.status == 401)
        let challenges = AuthenticationChallenge.parse(refused.wwwAuthenticate)
        #expect(challenges.map(\.scheme) == ["Bearer", "DPoP"])
        #expect(challenges.allSatisfy { $0["error"] == nil })
        #expect(challenges[0]["resource_metadata"] == "https://api.example.com/.well-known/oauth-protected-resource")
        #expect(challenges[1]["algs"]?.contains("ES256") == true)
    }

    /// Each hostile token is refused with `invalid_token` (401) on the Bearer challenge.
    @Test(arguments: HostileToken.allCases) func hostileTokensAreRefused(_ hostile: HostileToken) async throws {
        let token = try hostile.make(harness)
        let refused = try #require(
            try await refusal {
                try await harness.server().verify(
                    authorizationHeader: "Bearer \(token)", dpopHeader: nil, method: "GET", url: Harness.url)
            }, "\(hostile) was accepted")
        #expect(refused.code == ResourceServerRefusal.invalidToken && refused.status == 401, "\(hostile): \(refused)")
        let bearer = try #require(
            AuthenticationChallenge.parse(refused.wwwAuthenticate).first { $0.hasScheme("Bearer") })
        #expect(bearer["error"] == "invalid_token")
        #expect(!refused.reason.contains(token) && !refused.description.contains(token))
    }

    enum HostileToken: String, CaseIterable, CustomStringConvertible {
        case algNone, hs256WithThePublicKeyAsSecret, typJWT, typMissing, wrongAudience, wrongIssuer, issuerDifferentCase
        case expired, notYetValid, issuedInTheFuture, noClientID, noSubject, otherKey, unknownKid, boundAsBearer,
            signatureCut
        case cnfNotAnObject, audienceMissing
        var description: String { rawValue }

        func make(_ h: Harness) throws -> String {
            let now = Int64(Harness.now.timeIntervalSince1970)
            switch self {
            case .algNone:
                let header = Base64URL.encode(Array(#"{"alg":"none","typ":"at+jwt"}"#.utf8))
                return header + "." + Base64URL.encode(Array(JSONValue.object(h.claims()).serialized().utf8)) + "."
            case .hs256WithThePublicKeyAsSecret:
                let signer = try JWTSigner(
                    key: JWTKey(secret: Array(h.issuerPEM.utf8), keyID: "issuer-1"), algorithm: .hs256)
                return try h.token(signer: signer)
            case .typJWT: return try h.token(header: ["typ": "JWT"])
            case .typMissing: return try h.token(header: ["typ": .null])
            case .wrongAudience: return try h.token(["aud": "https://other.example.com"])
            case .wrongIssuer: return try h.token(["iss": "https://evil.example.com"])
            case .issuerDifferentCase: return try h.token(["iss": "https://ID.example.com"])
            case .expired: return try h.token(["exp": .number(JSONNumber(now - 31))])
            case .notYetValid: return try h.token(["nbf": .number(JSONNumber(now + 60))])
            case .issuedInTheFuture: return try h.token(["iat": .number(JSONNumber(now + 3600))])
            case .noClientID: return try h.token(["client_id": .null])
            case .noSubject: return try h.token(["sub": .null])
            case .otherKey:
                let other = try JWTSigner(
                    key: JWTKey(privateKey: PrivateKey.generate(.ec(.p256)), keyID: "issuer-1"), algorithm: .es256)
                return try h.token(signer: other)
            case .unknownKid:
                let other = try JWTSigner(
                    key: JWTKey(privateKey: PrivateKey.generate(.ec(.p256)), keyID: "nope"), algorithm: .es256)
                return try h.token(signer: other)
            case .boundAsBearer: return try h.token(bound: true)
            case .signatureCut: return String(try h.token().dropLast(4))
            case .cnfNotAnObject: return try h.token(["cnf": "jkt"])
            case .audienceMissing: return try h.token(["aud": .null])
            }
        }
    }

    /// A token another issuer signed is refused for its `iss`, not for the `kid` these keys lack
    /// (which said "unknownKey" and sent the reader to this issuer's keys, as `moose verify` showed).
    @Test func anotherIssuersTokenIsRefusedForItsIssuer() async throws {
        let theirs = try JWTSigner(
            key: JWTKey(privateKey: PrivateKey.generate(.ec(.p256)), keyID: "theirs"), algorithm: .es256)
        let token = try harness.token(["iss": "https://other.example.com"], signer: theirs)
        let refused = try #require(
            try await refusal {
                try await harness.server().verify(
                    authorizationHeader: "Bearer \(token)", dpopHeader: nil, method: "GET", url: Harness.url)
            })
        #expect(refused.code == ResourceServerRefusal.invalidToken, "\(refused.reason)")
        #expect(refused.reason == "the token failed issuerMismatch (iss)", "\(refused.reason)")
    }

    @Test func typJWTIsAcceptedOnlyWhenConfigured() async throws {
        let token = try harness.token(header: ["typ": "JWT"])
        var configuration = harness.configuration()
        configuration.acceptedTokenTypes = ["at+jwt", "JWT"]
        _ = try await harness.server(configuration).verify(
            authorizationHeader: "Bearer \(token)", dpopHeader: nil, method: "GET", url: Harness.url)
        let typed = try harness.token(header: ["typ": "application/at+jwt"])
        _ = try await harness.server().verify(
            authorizationHeader: "Bearer \(typed)", dpopHeader: nil, method: "GET", url: Harness.url)
    }

    @Test func expiryWithinTheLeewayIsAccepted() async throws {
        let token = try harness.token(["exp": .number(JSONNumber(Int64(Harness.now.timeIntervalSince1970) - 20))])
        _ = try await harness.server().verify(
            authorizationHeader: "Bearer \(token)", dpopHeader: nil, method: "GET", url: Harness.url)
    }

    @Test func aMissingScopeIsInsufficientScopeNaming() async throws {
        let token = try harness.token()
        let refused = try #require(
            try await refusal {
                try await harness.server().verify(
                    authorizationHeader: "Bearer \(token)", dpopHeader: nil, method: "GET", url: Harness.url,
                    requiredScopes: ["api.read", "api.write"])
            })
        #expect(refused.code == ResourceServerRefusal.insufficientScope && refused.status == 403)
        let bearer = try #require(AuthenticationChallenge.parse(refused.wwwAuthenticate).first)
        #expect(bearer["error"] == "insufficient_scope" && bearer["scope"] == "api.read api.write")
    }

    /// Scopes as an `scp` array (Azure AD, Okta) when there is no `scope`; `scope` wins when both are
    /// there; a wrong shape is `invalid_token`, never "no scopes".
    @Test func scopesAsAnSCPArrayAreRead() async throws {
        let server = harness.server()
        func verify(_ changes: JSONObject, needing scopes: [String]) async throws -> ResourceServerRefusal? {
            let token = try harness.token(changes)
            return try await refusal {
                try await server.verify(
                    authorizationHeader: "Bearer \(token)", dpopHeader: nil, method: "GET", url: Harness.url,
                    requiredScopes: scopes)
            }
        }
        let both = try await verify(
            ["scope": .null, "scp": .array(["api.read", "api.write"])], needing: ["api.read", "api.write"])
        #expect(both == nil, "\(String(describing: both))")
        let one = try await verify(["scope": .null, "scp": .array(["api.read"])], needing: ["api.write"])
        #expect(one?.code == ResourceServerRefusal.insufficientScope, "\(String(describing: one))")
        #expect(
            try await verify(["scp": .array(["api.write"])], needing: ["api.write"])?.code
                == ResourceServerRefusal.insufficientScope,
            "scope (api.read profile) is the one read when both are there")
        #expect(
            try await verify(["scope": .null, "scp": .array(["api.read", 7])], needing: [])?.code
                == ResourceServerRefusal.invalidToken)
        #expect(
            try await verify(["scope": .array(["api.read"])], needing: [])?.code == ResourceServerRefusal.invalidToken)
    }

    @Test(arguments: [
        "Bearer", "Bearer ", "Bearer a b", "Bearer a\"b", "Bearer a==b", "Bearer\ttoken", "Bearer a\r\nX-Injected: 1",
        "DPoP", "bearer  a, Bearer b"
    ])
    func malformedAuthorizationIsInvalidRequest(_ header: String) async throws {
        let refused = try #require(
            try await refusal {
                try await harness.server().verify(
                    authorizationHeader: header, dpopHeader: nil, method: "GET", url: Harness.url)
            })
        #expect(refused.code == ResourceServerRefusal.invalidRequest && refused.status == 400)
    }

    @Test func oversizedAuthorizationIsRefusedBeforeParsing() async throws {
        let header = "Bearer " + String(repeating: "a", count: 20_000)
        let refused = try #require(
            try await refusal {
                try await harness.server().verify(
                    authorizationHeader: header, dpopHeader: nil, method: "GET", url: Harness.url)
            })
        #expect(refused.code == ResourceServerRefusal.invalidRequest)
    }

    @Test func keysThatCannotBeFetchedAreUnavailableNotInvalid() async throws {
        struct Down: AccessTokenKeySource {
            func keys(for kid: String?) async throws -> [JWTKey] { throw CancellationError() }
        }
        let server = ResourceServer(configuration: harness.configuration(), keys: Down())
        let token = try harness.token()
        let refused = try #require(
            try await refusal {
                try await server.verify(
                    authorizationHeader: "Bearer \(token)", dpopHeader: nil, method: "GET", url: Harness.url)
            })
        #expect(
            refused.code == ResourceServerRefusal.temporarilyUnavailable && refused.status == 503
                && refused.challenges.isEmpty)
    }

    @Test func challengeValuesCannotBeInjected() throws {
        let challenge = ResourceServerChallenge(
            scheme: "Bearer\r\n", parameters: [("realm", "a\"b\\c\r\nSet-Cookie: x=1"), ("error", "é")])
        let value = challenge.headerValue
        #expect(!value.contains("\r") && !value.contains("\n"))
        #expect(value == #"Bearer realm="abc??Set-Cookie: x=1", error="?""#)
        let parsed = try #require(AuthenticationChallenge.parse(value).first)
        #expect(parsed["realm"] == "abc??Set-Cookie: x=1" && parsed["error"] == "?")
        let refusal = ResourceServerRefusal(
            code: ResourceServerRefusal.useDPoPNonce, status: 401, challenges: [],
            dpopNonce: "n\r\nX: y", reason: "test")
        #expect(refusal.headers.allSatisfy { !$0.value.contains("\n") })
    }

    @Test func protectedResourceMetadata() throws {
        let metadata = ProtectedResourceDocument(
            resource: "https://api.example.com/v1", authorizationServers: [Harness.issuer],
            scopesSupported: ["api.read"], dpopSigningAlgorithms: ["ES256"],
            dpopBoundAccessTokensRequired: true)
        #expect(metadata.wellKnownPath == "/.well-known/oauth-protected-resource/v1")
        #expect(metadata.url == "https://api.example.com/.well-known/oauth-protected-resource/v1")
        let object = try JSONValue(parsing: Array(metadata.json.utf8))
        #expect(object["resource"]?.stringValue == "https://api.example.com/v1")
        #expect(object["authorization_servers"]?.arrayValue?.first?.stringValue == Harness.issuer)
        #expect(object["bearer_methods_supported"]?.arrayValue == ["header"])
        #expect(object["dpop_bound_access_tokens_required"]?.boolValue == true)
        #expect(
            ProtectedResourceDocument(resource: "https://api.example.com", authorizationServers: []).wellKnownPath
                == "/.well-known/oauth-protected-resource")
        #expect(ProtectedResourceDocument(resource: "api.example.com", authorizationServers: []).wellKnownPath == nil)
    }
}
