import Foundation
@testable import MooseOAuth
import MooseHTTP
import HTTPTypes
import MooseTestSupport
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
        return try TokenResponse.parse(APIResponse(status: HTTPResponse.Status(code: item.status), body: Data(item.body.utf8)),
                                       requestedAt: Date(timeIntervalSince1970: 1_000), requestedScopes: requested)
    }

    func expectError(_ name: String, _ code: OAuthError.Code, sourceLocation: SourceLocation = #_sourceLocation) -> OAuthError? {
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
        #expect(rfc.expiresAt == Date(timeIntervalSince1970: 4_600))   // measured from when the request was sent
        #expect(rfc.scopes == ["openid"])                              // no scope in the answer: the requested one
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
        #expect(expectError("error_invalid_grant", OAuthError.invalidGrant)?.errorDescription == "refresh token revoked")
        _ = expectError("error_invalid_client_401", OAuthError.invalidClient)
        let html = expectError("error_html_page", OAuthError.invalidResponse)
        #expect(html?.message.contains("HTML page") == true)
        _ = expectError("error_503_maintenance", OAuthError.transient)
        _ = expectError("success_without_access_token", OAuthError.invalidResponse)
        _ = expectError("success_html_200", OAuthError.invalidResponse)
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
