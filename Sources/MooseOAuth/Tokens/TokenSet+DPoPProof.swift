#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import HTTPTypes

extension TokenSet {
    /// A DPoP proof (RFC 9449 §4.2) for one request, signed with this session's DPoP key (`dpopKey`),
    /// from the request as text — a script's or a configuration's method and URL: `DPoPKey.proof`
    /// once the text is checked. With `bindsAccessToken` the proof carries `ath`, the hash of this
    /// set's access token (a request to a resource server, RFC 9449 §7); without, it is a proof for the
    /// token endpoint (§5).
    ///
    /// ```swift
    /// let proof = try tokens.dpopProof(method: "GET", url: "https://api.example.com/me")
    /// request.headerFields[.authorization] = "DPoP \(tokens.accessToken)"
    /// request.headerFields[.dpop] = proof
    /// ```
    ///
    /// - Parameters:
    ///   - method: the request's method (`htm`), any case (`post` is `POST`).
    ///   - url: the request's absolute http(s) URL (`htu`: its query and fragment are left out).
    ///   - nonce: the server's last `DPoP-Nonce` (RFC 9449 §8), if it gave one.
    ///   - bindsAccessToken: whether the proof carries `ath`; default `true`.
    ///   - date: the proof's `iat`; default now.
    /// - Throws: `OAuthError.invalidConfiguration` when the set has no DPoP key (its tokens are not
    ///   DPoP-bound), `url` is not an absolute http(s) URL with a host, `method` is not an HTTP method
    ///   (RFC 9110 §9.1's token) or `nonce` is empty or has characters outside RFC 9449 §8.1's NQCHAR;
    ///   what `DPoPKey.proof` throws.
    public func dpopProof(
        method: String, url: String, nonce: String? = nil, bindsAccessToken: Bool = true, at date: Date = Date()
    ) throws -> String {
        guard let key = dpopKey else {
            throw OAuthError(
                OAuthError.invalidConfiguration, "the session has no DPoP key: its tokens are not DPoP-bound")
        }
        guard let target = URL(string: url), let scheme = target.scheme?.lowercased(),
            scheme == "https" || scheme == "http", target.host != nil
        else {
            throw OAuthError(
                OAuthError.invalidConfiguration, "the request URL \(url.clipped(to: 64)) is not an absolute http(s) URL"
            )
        }
        guard let htm = HTTPRequest.Method(method.uppercased()) else {
            throw OAuthError(
                OAuthError.invalidConfiguration, "the request method \(method.clipped(to: 64)) is not an HTTP method")
        }
        // NQCHAR = %x21 / %x23-5B / %x5D-7E (RFC 9449 §8.1).
        if let nonce,
            nonce.isEmpty
                || !nonce.utf8.allSatisfy({ $0 == 0x21 || (0x23...0x5B).contains($0) || (0x5D...0x7E).contains($0) })
        {
            throw OAuthError(
                OAuthError.invalidConfiguration, "the DPoP nonce has characters a nonce cannot have (RFC 9449 §8.1)")
        }
        return try key.proof(
            method: htm, url: target, accessToken: bindsAccessToken ? accessToken : nil, nonce: nonce, at: date)
    }
}
