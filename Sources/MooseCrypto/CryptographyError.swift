/// The one error type of `MooseCrypto`.
///
/// A struct with a private code and static members, so new cases can be added without breaking
/// callers. Match a case with `~=`:
///
/// ```swift
/// do { _ = try AESGCM.open(box, using: key) }
/// catch CryptographyError.authenticationFailure { print("tampered") }
/// ```
///
/// The `description` never contains key material, plaintext or signatures.
public struct CryptographyError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What kind of failure this is.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        let name: String
        /// The code's stable name, such as `invalidKey`.
        public var description: String { name }
    }

    /// What kind of failure this is.
    public let code: Code
    /// A human-readable explanation, free of secrets.
    public let message: String
    /// The OpenSSL error queue at the time of the failure, oldest first (reason strings only).
    public let openSSLErrors: [String]

    init(_ code: Code, _ message: String, openSSLErrors: [String] = []) {
        self.code = code
        self.message = message
        self.openSSLErrors = openSSLErrors
    }

    /// A human-readable description: the message plus OpenSSL's reasons, if any.
    public var description: String {
        if openSSLErrors.isEmpty { return "\(code): \(message)" }
        return "\(code): \(message) (OpenSSL: \(openSSLErrors.joined(separator: "; ")))"
    }

    /// Key material could not be imported or does not fit the operation.
    public static let invalidKey = Code(name: "invalidKey")
    /// A parameter (nonce, length, encoding) is outside what the operation accepts.
    public static let invalidParameter = Code(name: "invalidParameter")
    /// A signature is not well-formed for its algorithm (for example a DER signature with trailing bytes).
    public static let invalidSignatureEncoding = Code(name: "invalidSignatureEncoding")
    /// An AEAD tag did not verify: the ciphertext, nonce, AAD or key is not the one sealed.
    public static let authenticationFailure = Code(name: "authenticationFailure")
    /// The key does not support the requested algorithm (for example ECDSA with an RSA key).
    public static let algorithmMismatch = Code(name: "algorithmMismatch")
    /// libcrypto reported a failure that is not the caller's fault.
    public static let libraryFailure = Code(name: "libraryFailure")
}

extension CryptographyError.Code {
    /// Lets a `catch` clause match on a code: `catch CryptographyError.invalidKey`.
    public static func ~= (code: Self, error: any Error) -> Bool {
        (error as? CryptographyError)?.code == code
    }
}
