import Foundation
import MooseJWT
import MooseTestSupport
import Testing

/// The RFC vectors in Fixtures/rfc/jose-vectors.json.
struct RFCVectors: Decodable {
    struct Vector: Decodable {
        let source: String
        let alg: String
        let key: [String: String]
        let compact: String
        let payload: String?
        let deterministic: Bool?
    }
    struct Unsecured: Decodable { let compact: String }
    struct Thumbprint: Decodable { let key: [String: String]; let thumbprint: String }
    struct PKCE: Decodable { let code_verifier: String; let code_challenge: String }

    let vectors: [Vector]
    let unsecured: Unsecured
    let thumbprint: Thumbprint
    let pkce: PKCE

    static func load() throws -> RFCVectors {
        try JSONDecoder().decode(RFCVectors.self, from: Fixtures.data("rfc/jose-vectors.json"))
    }
}

/// The joserfc-made tokens in Fixtures/joserfc/tokens.json.
struct JoserfcTokens: Decodable {
    let issuer: String
    let test_now: Double
    let tokens: [String: String]

    static func load() throws -> JoserfcTokens {
        try JSONDecoder().decode(JoserfcTokens.self, from: Fixtures.data("joserfc/tokens.json"))
    }

    func token(_ name: String) throws -> String {
        try #require(tokens[name], "fixture token \(name)")
    }

    var clock: @Sendable () -> Date {
        let now = Date(timeIntervalSince1970: test_now)
        return { now }
    }
}

func jwk(_ members: [String: String]) throws -> JWK {
    var object = JSONObject()
    for (key, value) in members.sorted(by: { $0.key < $1.key }) { object[key] = .string(value) }
    return try JWK(object)
}

/// Asserts that `body` throws a `JWTError` with `code`, and returns the error for more checks.
@discardableResult
func expectJWTError(
    _ code: JWTError.Code, sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> Void
) -> JWTError? {
    do {
        try body()
        Issue.record("expected JWTError.\(code), but nothing was thrown", sourceLocation: sourceLocation)
    } catch let error as JWTError {
        #expect(error.code == code, "expected \(code), got \(error)", sourceLocation: sourceLocation)
        return error
    } catch {
        Issue.record("expected JWTError.\(code), got \(error)", sourceLocation: sourceLocation)
    }
    return nil
}
