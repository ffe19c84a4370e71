#if MoosePostgres
/// The one error type of `MoosePostgres`.
///
/// Messages name the database by its redacted URL (`postgres://moose:***@db.example.com/moose`) and
/// never contain a password, a token, a key or a sealed value. `SessionStorage` methods wrap these in
/// `OAuthError` (`storeUnavailable`, `leaseLost`, `leaseBusy`, `storageConflict`) with this error as
/// the `underlying` cause; the other methods (`prepare`, `check`, rotation) throw it directly.
///
/// ```swift
/// do { try await storage.prepare() }
/// catch PostgresStorageError.wrongKey { … the master key is not this store's … }
/// catch PostgresStorageError.unavailable { … the database cannot be reached … }
/// ```
public struct PostgresStorageError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure this is.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        let name: String
        /// The code's name.
        public var description: String { name }

        /// Lets a `catch` clause match on a code: `catch PostgresStorageError.wrongKey`.
        public static func ~= (code: Self, error: any Error) -> Bool { (error as? PostgresStorageError)?.code == code }
    }

    /// What kind of failure this is.
    public let code: Code
    /// A human-readable explanation, free of secrets.
    public let message: String
    /// The SQLSTATE the server sent, when it sent one (`28P01`, `57P01`…).
    public let sqlState: String?

    init(_ code: Code, _ message: String, sqlState: String? = nil) {
        self.code = code
        self.message = message
        self.sqlState = sqlState
    }

    /// `code: message`
    public var description: String { "\(code): \(message)" }

    /// The URL or a setting is invalid (an unknown parameter, a bad port, an unsupported `sslmode`).
    public static let invalidConfiguration = Code(name: "invalidConfiguration")
    /// The database cannot be reached, refused the login, or did not answer in time. Nothing was
    /// written; retrying later may help.
    public static let unavailable = Code(name: "unavailable")
    /// The master key is not the one this store's tables were created with.
    public static let wrongKey = Code(name: "wrongKey")
    /// The master key could not be obtained (missing key file or environment variable, empty passphrase).
    public static let keyUnavailable = Code(name: "keyUnavailable")
    /// A sealed value or a wrapped data key does not authenticate: it was modified, copied from another
    /// row or generation, or sealed under a key this store does not have.
    public static let tampered = Code(name: "tampered")
    /// The store's metadata is missing or damaged (not a Moose schema, a half-created store).
    public static let corrupt = Code(name: "corrupt")
    /// The schema was migrated by a newer Moose: this one refuses to touch it.
    public static let unsupportedVersion = Code(name: "unsupportedVersion")
    /// The schema is missing or older than this Moose needs, and `migrations=verify` forbids creating
    /// or migrating it: run once with `migrations=apply` (as a user allowed to create tables).
    public static let notMigrated = Code(name: "notMigrated")
    /// An argument is invalid (an empty or over-long key or lease name, a ttl out of range).
    public static let invalidArgument = Code(name: "invalidArgument")
}
#endif
