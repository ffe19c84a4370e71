import MooseSealing

/// The one error type of `MooseSecretStore`.
///
/// None of these errors changes or deletes data: a wrong key, a tampered row or a damaged file is
/// reported and left as it is. Messages never contain a secret value or key material.
///
/// ```swift
/// do { let token = try store.get(namespace: "session", name: "refresh_token") }
/// catch SecretStoreError.wrongKey { … ask for the right key … }
/// catch SecretStoreError.tampered { … }
/// ```
public struct SecretStoreError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure this is.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        let name: String
        /// The code's name.
        public var description: String { name }

        /// Lets a `catch` clause match on a code: `catch SecretStoreError.wrongKey`.
        public static func ~= (code: Self, error: any Error) -> Bool {
            (error as? SecretStoreError)?.code == code
        }
    }

    /// What kind of failure this is.
    public let code: Code
    /// A human-readable explanation, free of secrets.
    public let message: String
    /// The namespace of the row concerned (for `tampered`).
    public let namespace: String?
    /// The name of the row concerned (for `tampered`).
    public let name: String?
    /// The underlying cause (a SQLite or libcrypto message), free of secrets.
    public let underlying: String?

    package init(
        _ code: Code, _ message: String, namespace: String? = nil, name: String? = nil, underlying: String? = nil
    ) {
        self.code = code
        self.message = message
        self.namespace = namespace
        self.name = name
        self.underlying = underlying
    }

    /// `code: message`
    public var description: String { "\(code): \(message)" }

    /// The master key is not the one this store was created with.
    public static let wrongKey = Code(name: "wrongKey")
    /// A stored value (or a wrapped data key) does not authenticate: it was modified, copied from
    /// another row, or rolled back to another key. `namespace` and `name` say which.
    public static let tampered = Code(name: "tampered")
    /// The file is damaged, truncated, or not a Moose store.
    public static let corrupt = Code(name: "corrupt")
    /// Another process holds the store's write lock for longer than the busy timeout.
    public static let busy = Code(name: "busy")
    /// The store or its key file cannot be read or written with the current permissions, or a key
    /// file is readable by other users.
    public static let permission = Code(name: "permission")
    /// Disk I/O failed (full disk, missing folder…).
    public static let io = Code(name: "io")
    /// The master key could not be obtained (missing environment variable, malformed key file…).
    public static let keyUnavailable = Code(name: "keyUnavailable")
    /// The store was written by a newer Moose (a schema version this one does not know).
    public static let unsupportedVersion = Code(name: "unsupportedVersion")
    /// An argument is invalid (empty name, value too large…).
    public static let invalidArgument = Code(name: "invalidArgument")
    /// A lease could not be acquired within the time allowed.
    public static let leaseTimeout = Code(name: "leaseTimeout")
    /// The lease expired or was taken over by another holder.
    public static let leaseLost = Code(name: "leaseLost")

    /// The error for a value that does not authenticate.
    public static func tampered(namespace: String, name: String) -> SecretStoreError {
        SecretStoreError(
            tampered, "the value \(namespace)/\(name) does not authenticate: it was modified or moved",
            namespace: namespace, name: name)
    }

    /// A master-key or envelope failure as the store's error, under the same code.
    init(_ error: SealingError) {
        let code =
            switch error.code {
            case .keyUnavailable: Self.keyUnavailable
            case .permission: Self.permission
            case .io: Self.io
            case .tampered: Self.tampered
            }
        self.init(code, error.message, underlying: error.underlying)
    }
}
