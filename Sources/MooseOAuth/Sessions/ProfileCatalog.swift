/// The profiles one store knows, as a person choosing among them sees them — `moose profile list`,
/// shell completion, an app's account picker: each stored row classified, and the plans kept outside
/// the rows (a settings file, an older layout) for profiles logged out of.
///
/// A row holds a session (usable, or needing a new login), only the plan a logout kept
/// (`OAuthSession.isLoggedOut`), or sealed bytes that do not open (`OAuthError.sessionDamaged`): a
/// damaged row counts as a session, so that nothing takes it for "none" and writes over it unasked.
/// Any other read failure is the store's, and is thrown, never listed.
public struct ProfileCatalog: Sendable {
    /// What one stored row holds.
    public enum Row: Sendable {
        /// A session, usable or needing a new login.
        case session(OAuthSession)
        /// Only the plan a logout kept (the session's tokens are gone).
        case loggedOut(OAuthSession)
        /// Sealed bytes that do not open.
        case damaged

        /// The row `load` reads: `nil` when there is none. Only `OAuthError.sessionDamaged` is
        /// classified as `damaged`; any other error is rethrown.
        ///
        /// - Parameter load: reads the row (a storage's `load`, or a synchronous read of it).
        public init?(_ load: () throws -> StoredSession?) throws {
            do {
                guard let stored = try load() else { return nil }
                self = stored.session.isLoggedOut ? .loggedOut(stored.session) : .session(stored.session)
            } catch let error as OAuthError where error.code == OAuthError.sessionDamaged {
                self = .damaged
            }
        }

        /// The session, when the row holds one that opens (not a row a logout left, nor a damaged one).
        public var session: OAuthSession? {
            if case .session(let session) = self { return session }
            return nil
        }
    }

    /// The stored rows, by key.
    public let rows: [String: Row]
    /// Plans kept outside the rows, by profile name: read for a profile with no row, or a damaged one.
    public let kept: [String: SessionPlan]

    /// A catalog of rows already read.
    ///
    /// - Parameters:
    ///   - rows: the store's rows, by key.
    ///   - kept: plans kept outside the store (e.g. `KeptPlans` for this store), by profile name.
    public init(rows: [String: Row], kept: [String: SessionPlan] = [:]) {
        self.rows = rows
        self.kept = kept
    }

    /// Reads every row of `storage`.
    ///
    /// - Parameters:
    ///   - storage: the store.
    ///   - kept: plans kept outside the store, by profile name.
    /// - Throws: the storage's error when it cannot list its keys or read a row (a damaged row is
    ///   listed, not thrown).
    public static func read(_ storage: any SessionStorage, kept: [String: SessionPlan] = [:]) async throws
        -> ProfileCatalog
    {
        var rows: [String: Row] = [:]
        for key in try await storage.keys() {
            let stored: Result<StoredSession?, any Error>
            do { stored = .success(try await storage.load(key)) } catch { stored = .failure(error) }
            rows[key] = try Row { try stored.get() }
        }
        return ProfileCatalog(rows: rows, kept: kept)
    }

    /// The profiles with a session (damaged rows too), sorted.
    public var sessions: [String] {
        rows.compactMap { key, row in
            if case .loggedOut = row { return nil }
            return key
        }.sorted()
    }

    /// The profiles with a plan and no session — rows a logout left, and plans kept outside the
    /// store for profiles without a row — sorted.
    public var loggedOut: [String] {
        let withSessions = Set(sessions)
        return Set(rows.keys).union(kept.keys).subtracting(withSessions).sorted()
    }

    /// The plan a plain new login of `name` follows: its row's (the session's, or the one its logout
    /// kept), else the plan kept outside the store. A damaged row's plan cannot be read.
    ///
    /// - Parameter name: the profile.
    /// - Returns: the plan, named `name`; `nil` when none is known.
    public func plan(of name: String) -> SessionPlan? {
        switch rows[name] {
        case .session(let session)?, .loggedOut(let session)?: return SessionPlan.of(session, key: name)
        case .damaged?, nil:
            guard var plan = kept[name] else { return nil }
            plan.name = name
            return plan
        }
    }

    /// The profiles whose sessions are for `resource` (RFC 8707), compared byte for byte in
    /// canonical form (`ResourceIdentifier.canonical`); rows a logout left and damaged rows are not
    /// sessions for anything.
    ///
    /// - Parameter resource: the resource, canonical.
    /// - Returns: the profiles, sorted.
    public func profiles(forResource resource: String) -> [String] {
        rows.compactMap { key, row in
            guard let stored = row.session?.resource,
                stored.utf8.elementsEqual(resource.utf8)
            else { return nil }
            return key
        }.sorted()
    }
}
