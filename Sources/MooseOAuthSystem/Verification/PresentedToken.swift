import MooseOAuth

/// A token as a person hands it over — typed, pasted, in a file or on standard input — made the token
/// itself: UTF-8 text without the whitespace around it, and without a leading `Bearer ` (the
/// `Authorization` scheme of RFC 6750 §2.1, any case) copied along from a request.
///
/// ```swift
/// let token = try PresentedToken.text(from: Array("Bearer eyJhbGciOi…\n".utf8))   // "eyJhbGciOi…"
/// let fromFile = try PresentedToken.read(file: "token.jwt")
/// ```
public enum PresentedToken {
    /// The most bytes read for one token: 1 MiB (a JWT is refused far below that, at
    /// `JWS.defaultMaximumSize`; the limit only bounds what is read).
    public static let maximumSize = 1 << 20

    /// The token in `bytes`: UTF-8 text, surrounding whitespace trimmed, a leading `Bearer ` (any
    /// ASCII case, followed by a space or a tab) and the whitespace after it removed.
    ///
    /// - Throws: `VerificationInputError.unusableToken` when the bytes are not UTF-8 or nothing is left.
    public static func text(from bytes: [UInt8]) throws(VerificationInputError) -> String {
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw VerificationInputError(VerificationInputError.unusableToken, "the token is not UTF-8 text")
        }
        var trimmed = Substring(text).drop { $0.isWhitespace }
        while let last = trimmed.last, last.isWhitespace { trimmed.removeLast() }
        // "Bearer" in any ASCII case, then whitespace (a space or a tab): the rule
        // `ResourceServer.accessToken(in:)` follows.
        if trimmed.utf8.prefix(6).map({ $0 | 0x20 }).elementsEqual("bearer".utf8),
            trimmed.dropFirst(6).first?.isWhitespace == true
        {
            trimmed = trimmed.dropFirst(6).drop { $0.isWhitespace }
        }
        guard !trimmed.isEmpty else {
            throw VerificationInputError(VerificationInputError.unusableToken, "the token is empty")
        }
        return String(trimmed)
    }

    /// The token in the file at `path` (at most `limit` bytes; a FIFO such as `<(command)` works), as
    /// `text(from:)`.
    ///
    /// - Throws: `VerificationInputError.unreadableFile` when the file is missing, unreadable or
    ///   larger than `limit`; `unusableToken` as `text(from:)`.
    public static func read(file path: String, limit: Int = maximumSize) throws(VerificationInputError) -> String {
        let bytes: [UInt8]
        do {
            bytes = try SessionPlan.readFile(path, what: "token file", limit: limit)
        } catch let error as OAuthError {
            throw VerificationInputError(VerificationInputError.unreadableFile, error.message)
        } catch {
            throw VerificationInputError(VerificationInputError.unreadableFile, "cannot read token file \(path)")
        }
        return try text(from: bytes)
    }
}
