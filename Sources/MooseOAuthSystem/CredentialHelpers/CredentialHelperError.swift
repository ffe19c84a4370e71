import MooseOAuth // String.clipped(to:)

/// Why a credential helper exchange failed: what git (git-credential(1)), docker (docker-credential-helpers)
/// or kubectl (client-go's exec credential plugins) handed over could not be read, or the answer cannot
/// carry what it would have to.
///
/// Messages never contain a secret; the outside text they quote (a requested API version) is clipped,
/// and still needs escaping before it reaches a terminal.
///
/// ```swift
/// do { request = try GitCredentialRequest(parsing: input) }
/// catch CredentialHelperError.malformedInput { … git sent something else than key=value lines … }
/// ```
public struct CredentialHelperError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure this is; match with `catch CredentialHelperError.malformedInput`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        let name: String
        /// The code's stable name, such as `malformedInput`.
        public var description: String { name }

        /// Lets a `catch` clause match on a code.
        public static func ~= (code: Self, error: any Error) -> Bool {
            (error as? CredentialHelperError)?.code == code
        }
    }

    /// The input is not in the protocol's format (a line without `=`, a NUL byte, JSON that is not the
    /// expected object).
    public static let malformedInput = Code(name: "malformedInput")
    /// The input is larger than the protocol's limit (in bytes or in attributes).
    public static let inputTooLarge = Code(name: "inputTooLarge")
    /// The caller asks for a protocol version this implementation does not speak (an ExecCredential
    /// `apiVersion` other than client.authentication.k8s.io/v1 and v1beta1).
    public static let unsupportedVersion = Code(name: "unsupportedVersion")
    /// A value the answer would carry cannot be written in the protocol (a newline in a git attribute,
    /// a token outside RFC 6750's b64token set): nothing is written rather than something the other
    /// side would read differently.
    public static let unrepresentableValue = Code(name: "unrepresentableValue")

    /// What kind of failure this is.
    public let code: Code
    /// A human-readable explanation, free of secrets.
    public let message: String

    /// An error with `code` and `message` (apps implementing a helper of their own may throw these too).
    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// `code: message`.
    public var description: String { "\(code): \(message)" }

    /// `text` as an error message may quote it: at most 64 characters of it, then `…`.
    static func quoted(_ text: String) -> String {
        text.clipped(to: 64)
    }
}
