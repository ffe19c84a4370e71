/// What went wrong reading what a verification starts from: a token a person handed over
/// (`PresentedToken`), key files, a JWKS document or URL, an issuer's discovery (`VerificationKeys`).
///
/// A struct with a private code and static members, as `JWTError` and `OAuthError`, so it can grow
/// without breaking callers. Match with `~=`:
///
/// ```swift
/// do { keys = try await VerificationKeys.load([.issuer(issuer)], transport: transport) }
/// catch VerificationInputError.fetchFailed { … }   // the network or the server: try again later
/// ```
///
/// Messages name the file, URL or issuer concerned and never contain a token or key material. The
/// reasons a JWKS's members were skipped quote their `kid`s (clipped, at most five): escape a message
/// before it reaches a terminal.
public struct VerificationInputError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure this is.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        let name: String
        /// Whether this code means "what was given is unusable" (fix the input), as opposed to a
        /// failure of the network or of a server (try again, or fix the server).
        let isInputError: Bool
        /// The code's stable name, such as `unreadableFile`.
        public var description: String { name }

        /// Lets a `catch` clause match on a code: `catch VerificationInputError.unusableKey`.
        public static func ~= (code: Self, error: any Error) -> Bool {
            (error as? VerificationInputError)?.code == code
        }
    }

    /// What kind of failure this is.
    public let code: Code
    /// A human-readable explanation, free of secrets.
    public let message: String
    /// What was being read when it failed (`nil` for a token).
    public let source: VerificationKeys.Source?
    /// The underlying cause, if any: the transport's `HTTPRequestError` for `fetchFailed`, the
    /// discovery's `OAuthError` for `discoveryFailed`, the `JWTError` of an unusable key.
    public let underlying: (any Error & Sendable)?

    init(
        _ code: Code, _ message: String, source: VerificationKeys.Source? = nil,
        underlying: (any Error & Sendable)? = nil
    ) {
        self.code = code
        self.message = message
        self.source = source
        self.underlying = underlying
    }

    /// `true` when what was given is unusable (a missing file, a key that is no key, a URL that is
    /// not https) rather than the network or a server failing.
    public var isInputError: Bool { code.isInputError }

    /// The message, prefixed with its code.
    public var description: String { "\(code): \(message)" }

    /// A file cannot be read: missing, unreadable, or larger than its limit.
    public static let unreadableFile = Code(name: "unreadableFile", isInputError: true)
    /// The token handed over is not UTF-8 text, or is empty once trimmed.
    public static let unusableToken = Code(name: "unusableToken", isInputError: true)
    /// A key file, JWKS or secret holds no usable key: neither PEM nor JSON, a PEM or JWK that does
    /// not parse, a JWKS without one usable key, an empty secret.
    public static let unusableKey = Code(name: "unusableKey", isInputError: true)
    /// A JWKS location is not a valid URL, or is plain `http` to another machine (keys decide what
    /// "verified" means: they are never fetched in clear text, `TransportSecurity`).
    public static let insecureLocation = Code(name: "insecureLocation", isInputError: true)
    /// An issuer breaks the issuer rule (`IssuerRule`: an absolute https URL, no query or fragment).
    public static let invalidIssuer = Code(name: "invalidIssuer", isInputError: true)
    /// A JWKS could not be fetched: the transport failed (`underlying`), the server answered another
    /// status than 200, or a larger document than allowed.
    public static let fetchFailed = Code(name: "fetchFailed", isInputError: false)
    /// An issuer's discovery failed (`underlying`: the `OAuthError`), or its document names no
    /// `jwks_uri`.
    public static let discoveryFailed = Code(name: "discoveryFailed", isInputError: false)
}
