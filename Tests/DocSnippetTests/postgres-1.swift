// docs/postgres.md, ```swift block 1: the region is quoted there word for word (DocSnippetTests).
#if MoosePostgres
import MooseOAuth
import MoosePostgres

enum Postgres1 {
    /// The replica's own work with its token.
    static func work(_ token: AccessToken) async throws {}

    static func snippet(flow: any Authorizable) async throws {
        // snippet begins
        let storage = try PostgresSessionStorage(
            url: "postgres://moose@db.internal:5432/moose?sslmode=verify-full&sslrootcert=/etc/moose/db-ca.pem",
            masterKey: .environment("MOOSE_STORE_KEY")) // the same key on every replica
        try await withThrowingDiscardingTaskGroup { group in
            group.addTask { await storage.run() } // the connection pool and the LISTEN connection
            let coordinator = RefreshCoordinator(key: "default", storage: storage, authorizer: flow)
            let token = try await coordinator.accessToken() // one refresh for all replicas
            try await work(token) // the replica's own work
            group.cancelAll() // closes the pool
        }
        // snippet ends
    }
}
#endif
