import Foundation
@testable import MooseOAuth
import MooseHTTP
import HTTPTypes
import MooseTestSupport
import MooseURLSession
import Testing

struct TokenResponseTests {
    struct Case: Decodable { let status: Int; let body: String }
    let cases: [String: Case]

    init() throws {
        let data = try Fixtures.data("oauth/token-responses.json")
        var decoded = try JSONDecoder().decode([String: Case?].self, from: data.replacingAbout())
        decoded["about"] = nil
        cases = decoded.compactMapValues { $0 }
    }

    func parse(_ name: String, requested: [String] = ["openid"]) throws -> TokenSet {
        let item = try #require(cases[name])
        return try TokenResponse.parse(
            APIResponse(status: HTTPResponse.Status(code: item.status), body: Data(item.body.utf8)),
            requestedAt: Date(timeIntervalSince1970: 1_000), requestedScopes: requested)
    }

    func expectError(_ name: String, _ code: OAuthError.Code, sourceLocation: SourceLocation = #_sourceLocation)
        -> OAuthError?
    {
        do {
            _ = try parse(name)
            Issue.record("\(name) parsed", sourceLocation: sourceLocation)
        } catch let error as OAuthError {
            #expect(error.code == code, "\(name): \(error)", sourceLocation: sourceLocation)
            return error
        } catch {
            Issue.record("\(name): \(error)", sourceLocation: sourceLocation)
        }
        return nil
    }

    @Test func successfulResponses() throws {
        let rfc = try parse("success_rfc6749_5_1")
        #expect(rfc.accessToken == "2YotnFZFEjr1zCsicMWpAA" && rfc.refreshToken == "tGzv3JOkF0XG5Qx2TlKWIA")
        #expect(rfc.expiresAt == Date(timeIntervalSince1970: 4_600)) // measured from when the request was sent
        #expect(rfc.scopes == ["openid"]) // no scope in the answer: the requested one
        let liberal = try parse("success_lowercase_bearer_string_expiry")
        #expect(liberal.tokenType == "Bearer" && liberal.expiresAt == Date(timeIntervalSince1970: 1_120))
        #expect(liberal.scopes == ["read", "write"] && liberal.idToken == "x.y.z")
        let bare = try parse("success_no_expiry_no_type")
        #expect(bare.expiresAt == nil && bare.tokenType == "Bearer" && bare.isValid(for: 3600))
        #expect(!bare.description.contains("abc"))
    }

    @Test func errorResponsesAreTyped() throws {
        let rfc = expectError("error_rfc6749_5_2", OAuthError.server)
        #expect(rfc?.oauthError == "invalid_request" && rfc?.errorDescription == "missing grant_type")
        #expect(rfc?.errorURI == "https://example.com/errors/1")
        #expect(
            expectError("error_invalid_grant", OAuthError.invalidGrant)?.errorDescription == "refresh token revoked")
        _ = expectError("error_invalid_client_401", OAuthError.invalidClient)
        let html = expectError("error_html_page", OAuthError.invalidResponse)
        #expect(html?.message.contains("HTML page") == true)
        _ = expectError("error_503_maintenance", OAuthError.transient)
        _ = expectError("success_without_access_token", OAuthError.invalidResponse)
        _ = expectError("success_html_200", OAuthError.invalidResponse)
    }

    func classify(_ status: Int, _ body: String) -> OAuthError? {
        do {
            _ = try TokenResponse.parse(
                APIResponse(status: HTTPResponse.Status(code: status), body: Data(body.utf8)),
                requestedAt: Date(), requestedScopes: [])
        } catch let error as OAuthError {
            return error
        } catch {}
        return nil
    }

    /// Issue 33 §4/§5: an error answer without an OAuth `error` member. A 401/403 is a refused client
    /// (Glewlwyd refuses every bad client authentication so), a 400 with an empty body a refused grant
    /// (Glewlwyd's answer to a dead or replayed refresh token); anything else stays a malformed
    /// answer, and every one keeps its status.
    @Test func bareRefusalsAreClassified() throws {
        for status in [401, 403] {
            for body in ["", "Forbidden", "{}"] {
                let error = try #require(classify(status, body))
                #expect(
                    error.code == OAuthError.invalidClient && error.status == status && error.oauthError == nil,
                    "\(status) \(body): \(error)")
                let hint =
                    "the client's credentials were refused: check the client id and its secret or key (and the key's kid)"
                #expect(error.message.contains(hint), "\(error.message)")
            }
        }
        for body in ["", "\r\n"] {
            let error = try #require(classify(400, body))
            #expect(
                error.code == OAuthError.invalidGrant && error.status == 400 && error.oauthError == nil,
                "\(body): \(error)")
            #expect(
                error.message.contains("refused the grant") && error.message.contains("without an OAuth error body"),
                "\(error.message)")
        }
        // A page or text that is not an OAuth answer: a proxy's page, a wrong URL — not the end of a session.
        let others = [
            (400, "<html><body>Bad Request</body></html>"), (400, "bad request"), (400, "{}"),
            (400, #"{"message":"no"}"#), (404, ""),
            (405, "{}"), (422, "")
        ]
        for (status, body) in others {
            let error = try #require(classify(status, body))
            #expect(error.code == OAuthError.invalidResponse && error.status == status, "\(status) \(body): \(error)")
        }
        // An OAuth error still decides, whatever the status.
        #expect(classify(401, #"{"error":"invalid_grant"}"#)?.code == OAuthError.invalidGrant)
        #expect(classify(400, #"{"error":"invalid_client"}"#)?.code == OAuthError.invalidClient)
    }
}

/// Issue 33 §4/§5 at the real Glewlwyd 2.7.5 (tools/glewlwyd), whose refusals carry no OAuth error:
/// a wrong client secret is a bare 403, a replayed (one-use, already rotated) refresh token a 400
/// with an empty body.
@Suite(.serialized)
struct GlewlwydBareRefusalTests {
    @Test func aWrongClientSecretIsARefusedClient() async throws {
        try await Glewlwyd.exclusively {
            guard let issuer = Glewlwyd.issuer else { Issue.record(Comment(rawValue: Glewlwyd.unavailable)); return }
            let transport = URLSessionTransport()
            let metadata = try await Discovery(transport: transport).metadata(for: issuer)
            let client = OAuthClient(
                metadata: metadata, clientID: "moose-service", authentication: .clientSecretBasic("not-the-secret"),
                transport: transport)
            let refused = await #expect(throws: OAuthError.self) {
                _ = try await ClientCredentialsFlow(client: client).authorize(
                    AuthorizationParameters(scopes: ["api.read"]))
            }
            #expect(
                refused?.code == OAuthError.invalidClient && refused?.oauthError == nil,
                "\(String(describing: refused))")
            #expect(refused?.status == 401 || refused?.status == 403, "\(String(describing: refused))")
            #expect(refused?.message.contains("the client's credentials were refused") == true)
            #expect(!"\(String(describing: refused))".contains("not-the-secret"))
        }
    }

    @Test func aReplayedRefreshTokenIsARefusedGrant() async throws {
        // Glewlwyd has one user and one registered loopback port: tests take turns.
        try await Glewlwyd.exclusively {
            guard let issuer = Glewlwyd.issuer else { Issue.record(Comment(rawValue: Glewlwyd.unavailable)); return }
            let transport = URLSessionTransport()
            let metadata = try await Discovery(transport: transport).metadata(for: issuer)
            let client = OAuthClient(metadata: metadata, clientID: "moose-public", transport: transport)
            let agent = try GlewlwydResourceTests.signingIn(port: Glewlwyd.redirectPort)
            let flow = AuthorizationCodeFlow(
                client: client, redirectURI: agent.redirectURI, userAgent: agent,
                idTokens: try GlewlwydResourceTests.validator(metadata, "moose-public", transport))
            let tokens = try await flow.authorize(AuthorizationParameters(scopes: ["openid", "offline_access"]))
            let first = try #require(tokens.refreshToken)
            // One use: the refresh rotates it…
            let fresh = try await client.refresh(tokens)
            #expect(fresh.refreshToken != nil && fresh.refreshToken != first)
            // …and the spent one, replayed, is refused with a 400 and an empty body: the grant, not the answer.
            let replayed = await #expect(throws: OAuthError.self) { _ = try await client.refresh(tokens) }
            #expect(
                replayed?.code == OAuthError.invalidGrant && replayed?.status == 400 && replayed?.oauthError == nil,
                "\(String(describing: replayed))")
            #expect(
                replayed?.message.contains("without an OAuth error body") == true, "\(String(describing: replayed))")
        }
    }
}

extension Data {
    /// The fixture's "about" member is a string; make it decodable as an optional case (null).
    func replacingAbout() -> Data {
        guard var object = (try? JSONSerialization.jsonObject(with: self)) as? [String: Any] else { return self }
        object["about"] = NSNull()
        return (try? JSONSerialization.data(withJSONObject: object)) ?? self
    }
}
