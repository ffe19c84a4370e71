import Foundation
import MooseJWT
import MooseOAuth
import Testing

/// The code of the `OAuthError` `body` throws; `nil` when it throws nothing (or another error).
private func oauthErrorCode<T>(_ body: () throws -> T) -> OAuthError.Code? {
    do {
        _ = try body()
        return nil
    } catch let error as OAuthError {
        return error.code
    } catch {
        return nil
    }
}

/// `TokenSet.dpopProof`: a proof for a request given as text, verified by MooseJWT's verifier.
@Suite struct DPoPProofFromTextTests {
    @Test func aProofForTheRequestItNames() throws {
        var tokens = TokenSet(accessToken: "at-1", tokenType: "DPoP")
        tokens.dpopKey = try DPoPKey.generate()
        let proof = try tokens.dpopProof(method: "post", url: "https://api.example.com/items?x=1#f", nonce: "n-1")
        let verified = try DPoPProofVerifier().verify(
            proof, method: "POST", url: "https://api.example.com/items", accessToken: "at-1")
        #expect(verified.nonce == "n-1" && verified.thumbprint == tokens.dpopKey?.thumbprint)
        // Without ath: a proof for the token endpoint.
        let bare = try tokens.dpopProof(method: "POST", url: "https://id.example.com/token", bindsAccessToken: false)
        #expect(
            try DPoPProofVerifier().verify(bare, method: "POST", url: "https://id.example.com/token").claims["ath"]
                == nil)
    }

    @Test func whatAProofCannotNameIsRefused() throws {
        var tokens = TokenSet(accessToken: "at-1", tokenType: "DPoP")
        #expect(
            oauthErrorCode { try tokens.dpopProof(method: "GET", url: "https://a.example/") }
                == OAuthError.invalidConfiguration)
        tokens.dpopKey = try DPoPKey.generate()
        let refused: [(String, String, String?)] = [
            ("GET", "/relative", nil), ("GET", "ftp://a.example/", nil), ("GET", "https:///nohost", nil),
            ("G E T", "https://a.example/", nil), ("GET", "https://a.example/", ""),
            ("GET", "https://a.example/", "with space"), ("GET", "https://a.example/", "quote\"")
        ]
        for (method, url, nonce) in refused {
            #expect(
                oauthErrorCode { try tokens.dpopProof(method: method, url: url, nonce: nonce) }
                    == OAuthError.invalidConfiguration, "\(method) \(url) \(nonce ?? "-")")
        }
    }
}
