/// The one error type of `MooseJWT`: malformed input, failed verification, failed claim checks.
///
/// A struct with a private code and static members, so it can grow without breaking callers.
/// Match with `~=`:
///
/// ```swift
/// do { _ = try verifier.verify(token) }
/// catch JWTError.expired { … }
/// catch JWTError.invalidSignature { … }
/// ```
///
/// Messages name what is wrong and where (a part, a byte offset, a claim) and never contain the
/// token, a signature or key material.
public struct JWTError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What kind of failure this is.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        let name: String
        /// Whether this code means "the input is unusable" (as opposed to "the token is invalid").
        let isInputError: Bool
        /// The code's stable name, such as `expired`.
        public var description: String { name }

        /// Lets a `catch` clause match on a code: `catch JWTError.expired`.
        public static func ~= (code: Self, error: any Error) -> Bool {
            (error as? JWTError)?.code == code
        }
    }

    /// What kind of failure this is.
    public let code: Code
    /// A human-readable explanation, free of secrets.
    public let message: String
    /// The claim or header parameter concerned, when there is one (`exp`, `aud`, `alg`…).
    public let field: String?
    /// A byte offset into the token, for malformed input.
    public let position: Int?

    init(_ code: Code, _ message: String, field: String? = nil, position: Int? = nil) {
        self.code = code
        self.message = message
        self.field = field
        self.position = position
    }

    /// `true` when the input could not be used at all (malformed, too large, encrypted, bad key
    /// material) rather than being a well-formed token that failed a check.
    public var isInputError: Bool { code.isInputError }

    /// The message, prefixed with its code.
    public var description: String { "\(code): \(message)" }

    // Unusable input.
    /// The token is not a compact JWS: wrong number of parts, empty header, and so on.
    public static let malformed = Code(name: "malformed", isInputError: true)
    /// A part is not strict base64url (RFC 7515 §2: no padding, URL-safe alphabet, no whitespace).
    public static let invalidBase64URL = Code(name: "invalidBase64URL", isInputError: true)
    /// The header or claims are not valid JSON, not an object, too deeply nested, or repeat a member.
    public static let invalidJSON = Code(name: "invalidJSON", isInputError: true)
    /// The token has five parts: a JWE. Moose does not decrypt tokens.
    public static let encryptedTokenUnsupported = Code(name: "encryptedTokenUnsupported", isInputError: true)
    /// The token is larger than the configured limit (64 KiB by default).
    public static let tokenTooLarge = Code(name: "tokenTooLarge", isInputError: true)
    /// A key (JWK, PEM, secret) could not be used.
    public static let invalidKey = Code(name: "invalidKey", isInputError: true)

    // A well-formed token that fails verification.
    /// `alg` is `none`: unsigned tokens are never accepted.
    public static let algorithmNone = Code(name: "algorithmNone", isInputError: false)
    /// `alg` is not in the verifier's allow-list (or is not an algorithm Moose knows).
    public static let algorithmNotAllowed = Code(name: "algorithmNotAllowed", isInputError: false)
    /// No configured key has the token's `kid`.
    public static let unknownKey = Code(name: "unknownKey", isInputError: false)
    /// The token has no `kid` and more than one configured key could verify it.
    public static let ambiguousKey = Code(name: "ambiguousKey", isInputError: false)
    /// The key's type or curve does not fit the algorithm, or the key is pinned to another algorithm.
    public static let keyAlgorithmMismatch = Code(name: "keyAlgorithmMismatch", isInputError: false)
    /// The key is too weak for the algorithm (HMAC secret shorter than the hash, RSA below 2048 bits).
    public static let weakKey = Code(name: "weakKey", isInputError: false)
    /// The header points at a key (`jku`, `x5u`, `jwk`): Moose never trusts header-supplied keys.
    public static let untrustedKeyReference = Code(name: "untrustedKeyReference", isInputError: false)
    /// The header lists a `crit` extension this verifier does not understand (RFC 7515 §4.1.11).
    public static let unsupportedCriticalHeader = Code(name: "unsupportedCriticalHeader", isInputError: false)
    /// The signature does not verify.
    public static let invalidSignature = Code(name: "invalidSignature", isInputError: false)
    /// The `typ` header is not the expected one.
    public static let typeMismatch = Code(name: "typeMismatch", isInputError: false)
    /// `exp` is in the past (beyond the leeway).
    public static let expired = Code(name: "expired", isInputError: false)
    /// `nbf` is in the future (beyond the leeway).
    public static let notYetValid = Code(name: "notYetValid", isInputError: false)
    /// `iat` is in the future (beyond the leeway).
    public static let issuedInFuture = Code(name: "issuedInFuture", isInputError: false)
    /// `iss` is not the expected issuer.
    public static let issuerMismatch = Code(name: "issuerMismatch", isInputError: false)
    /// `aud` does not contain an expected audience.
    public static let audienceMismatch = Code(name: "audienceMismatch", isInputError: false)
    /// The token names audiences (`aud`) and the verifier was given none to look for (RFC 7519
    /// §4.1.3: such a token MUST be rejected), nor told to accept any audience.
    public static let audienceNotChecked = Code(name: "audienceNotChecked", isInputError: false)
    /// The payload is not a JSON object, so it is no claims set (RFC 7519 §7.2 step 10).
    public static let claimsNotObject = Code(name: "claimsNotObject", isInputError: false)
    /// A required claim is missing.
    public static let missingClaim = Code(name: "missingClaim", isInputError: false)
    /// A claim has the wrong type (for example `exp` as a string).
    public static let invalidClaim = Code(name: "invalidClaim", isInputError: false)
}
