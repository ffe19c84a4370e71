/// Why a master key could not be had or an envelope could not be made or opened.
///
/// Not public: each store turns it into its own error type (`SecretStoreError`,
/// `PostgresStorageError`) with the same code, so an app sees one error type per module. Messages
/// name files, variables and key ids, never key material or a value.
package struct SealingError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure this is.
    package enum Code: Sendable, Hashable {
        /// The master key could not be obtained (missing variable or file, malformed key, empty passphrase).
        case keyUnavailable
        /// A key file (or its folder) cannot be read or created with the current permissions, or is
        /// readable by other users.
        case permission
        /// Randomness, the file system or libcrypto failed.
        case io
        /// A wrapped data key does not authenticate under the master key.
        case tampered
    }

    /// What kind of failure this is.
    package let code: Code
    /// A human-readable explanation, free of secrets.
    package let message: String
    /// The underlying cause (a libcrypto message), free of secrets.
    package let underlying: String?

    package init(_ code: Code, _ message: String, underlying: String? = nil) {
        self.code = code
        self.message = message
        self.underlying = underlying
    }

    /// `code: message`
    package var description: String { "\(code): \(message)" }
}
