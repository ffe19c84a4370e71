extension ResourceServer {
    /// The URL a bare token's check stands for: only DPoP proofs look at a request's URL, and a bare
    /// token comes with none.
    static let bareTokenURL = "https://resource.invalid/"

    /// The access token in `text` as a person, a file or a pipe hands one over: whitespace around it
    /// dropped, then a leading `Bearer` (any ASCII case) and the whitespace after it; `nil` when nothing is
    /// left. Bytes that are not UTF-8 become U+FFFD, which no token has: `verify(accessToken:)`
    /// refuses them, and the token is never echoed.
    ///
    /// ```swift
    /// ResourceServer.accessToken(in: Array(" Bearer mF_9.B5f-4.1JqM\n".utf8))   // "mF_9.B5f-4.1JqM"
    /// ```
    public static func accessToken(in text: [UInt8]) -> String? {
        var trimmed = Substring(String(decoding: text, as: UTF8.self)).drop { $0.isWhitespace }
        while let last = trimmed.last, last.isWhitespace { trimmed.removeLast() }
        // "Bearer" in any ASCII case, then whitespace (a space or a tab): the rule `PresentedToken` follows.
        if trimmed.utf8.prefix(6).map({ $0 | 0x20 }).elementsEqual("bearer".utf8),
            trimmed.dropFirst(6).first?.isWhitespace == true
        {
            trimmed = trimmed.dropFirst(6).drop { $0.isWhitespace }
        }
        return trimmed.isEmpty ? nil : String(trimmed)
    }

    /// Verifies an access token that came without an HTTP request — from a pipe, a message queue, a
    /// WebSocket's first frame — as `verify(authorizationHeader:…)` verifies `Bearer <token>` (RFC 6750
    /// §2.1): every check of a JWT (RFC 9068 §4) or, with introspection configured, of an opaque token
    /// (RFC 7662). A DPoP-bound token is refused, as no proof (RFC 9449 §7) can come with it.
    ///
    /// ```swift
    /// let principal = try await server.verify(accessToken: token, requiredScopes: ["api.read"])
    /// print(principal.textReport(resource: server.configuration.resource))
    /// ```
    ///
    /// - Parameters:
    ///   - token: the token alone (`accessToken(in:)` takes it out of text that may say `Bearer`).
    ///   - requiredScopes: scopes the caller needs; a token lacking one gets `insufficient_scope`.
    /// - Returns: who the token speaks for, and how it was checked (`verification`).
    /// - Throws: `ResourceServerRefusal`, as `verify(authorizationHeader:…)`; `invalidRequest` for a
    ///   token over the configuration's length limit or with characters outside RFC 6750's token68
    ///   (its reason says so in the token's terms, not a header's).
    public func verify(accessToken token: String, requiredScopes: [String] = []) async throws(ResourceServerRefusal)
        -> VerifiedPrincipal
    {
        let header = "Bearer " + token
        let limit = configuration.maximumAuthorizationLength
        guard header.utf8.count <= limit else {
            throw refusal(
                ResourceServerRefusal.invalidRequest, nil,
                "the token is \(token.utf8.count) bytes; the limit is \(max(0, limit - 7))")
        }
        guard Self.credentials(header) != nil else {
            throw refusal(
                ResourceServerRefusal.invalidRequest, .bearer,
                "this is not an access token: it has characters no token has (spaces, commas or others outside "
                    + "RFC 6750's token68: letters, digits and -._~+/=)")
        }
        return try await verify(
            authorizationHeader: header, dpopHeader: nil, method: "GET", url: Self.bareTokenURL,
            requiredScopes: requiredScopes)
    }
}
