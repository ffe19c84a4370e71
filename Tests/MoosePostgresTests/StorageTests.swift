#if MoosePostgres
import Foundation
import MooseCrypto
import MooseOAuth
@testable import MoosePostgres
import MooseSealing
import MooseTestSupport
import PostgresNIO
import Synchronization
import Testing

/// Every PostgreSQL test, one at a time: some stop and restart the server.
@Suite(
    .serialized,
    .enabled(
        if: PG.available,
        "PostgreSQL cannot run on this machine (tools/postgres/start failed; its output is on standard error)"))
struct PostgresTests {}

func randomKey() throws -> MasterKeySource { .raw(try SecureRandom.bytes(count: 32)) }

/// Runs `body`, which must fail, and checks its error with `check`.
func expectFailure(
    _ body: () async throws -> Void, sourceLocation: SourceLocation = #_sourceLocation,
    _ check: (any Error) -> Bool
) async throws {
    do {
        try await body()
        Issue.record("no error was thrown", sourceLocation: sourceLocation)
    } catch {
        #expect(check(error), "unexpected error: \(error)", sourceLocation: sourceLocation)
    }
}

func session(_ access: String, refresh: String = "r") -> OAuthSession {
    OAuthSession(
        issuer: "https://id.example.com", clientID: "pg", tokens: TokenSet(accessToken: access, refreshToken: refresh))
}

/// The `PostgresStorageError` inside a storage-contract error.
func storageError(_ error: any Error) -> PostgresStorageError? {
    (error as? PostgresStorageError) ?? ((error as? OAuthError)?.underlying as? PostgresStorageError)
}

extension PostgresTests {
    @Suite struct StorageContract {
        /// The contract suite from MooseTesting, each storage on a fresh schema: directly, and through
        /// PgBouncer in transaction mode (LISTEN on PostgreSQL itself, and with notifications off).
        @Test(arguments: ["direct", "pgbouncer", "pgbouncer-polling"])
        func keepsTheStorageContract(_ route: String) async throws {
            let schemas = Mutex<[ObjectIdentifier: String]>([:])
            let key = try randomKey()
            try await Fleet.with { fleet in
                try await SessionStorageContract.verify(
                    {
                        let schema = PG.freshSchema()
                        let url =
                            switch route {
                            case "direct": try PG.direct(schema: schema)
                            case "pgbouncer": try PG.bouncer(schema: schema)
                            default: PG.url(try PG.require().bouncerURL, schema: schema, "listen=off")
                            }
                        let storage = try fleet.storage(url, key: key)
                        schemas.withLock { $0[ObjectIdentifier(storage)] = schema }
                        return storage
                    },
                    damage: { storage, key in
                        // One bit of the row's sealed bytes, flipped by SQL on the real database.
                        let made = try #require(storage as? PostgresSessionStorage)
                        let schema = try #require(schemas.withLock { $0[ObjectIdentifier(made)] })
                        _ = try await PG.sql(
                            "UPDATE \(unescaped: "\"\(schema)\".sessions") SET sealed = set_byte(sealed, 20, get_byte(sealed, 20) # 1) WHERE key = \(key)"
                        )
                    })
            }
            for schema in schemas.withLock({ Array($0.values) }) { await PG.dropSchema(schema) }
        }
    }

    @Suite struct Storage {
        /// The database holds ciphertext only; each value opens only in its own row and generation.
        @Test func valuesAreSealedAndBoundToTheirRowAndGeneration() async throws {
            let schema = PG.freshSchema()
            defer { Task { await PG.dropSchema(schema) } }
            let canary = "canary-access-\(UUID().uuidString)"
            try await Fleet.with { fleet in
                let storage = try fleet.storage(try PG.direct(schema: schema), key: try randomKey())
                let first = try await storage.save(
                    session(canary, refresh: "canary-refresh"), key: "a", expectedGeneration: nil, lease: nil)
                _ = try await storage.save(session("other"), key: "b", expectedGeneration: nil, lease: nil)
                let dump = try await PG.sql(
                    PostgresQuery(
                        unsafeSQL: "SELECT string_agg(encode(sealed, 'escape'), '') FROM \"\(schema)\".sessions"))
                let text = ((try dump.first?.decode(String?.self)) ?? nil) ?? ""
                #expect(!text.contains("canary"), "a token reached the database in plaintext")
                // A ciphertext copied into another row does not open there.
                _ = try await PG.sql(
                    "UPDATE \(unescaped: "\"\(schema)\".sessions") SET sealed = (SELECT sealed FROM \(unescaped: "\"\(schema)\".sessions") WHERE key = 'a') WHERE key = 'b'"
                )
                try await expectFailure({ _ = try await storage.load("b") }) {
                    storageError($0)?.code == PostgresStorageError.tampered
                }
                // Rolled back to an older generation's value: does not open either.
                let old = try #require(
                    try await PG.sql("SELECT sealed FROM \(unescaped: "\"\(schema)\".sessions") WHERE key = 'a'").first?
                        .decode(ByteBuffer.self))
                _ = try await storage.save(session("newer"), key: "a", expectedGeneration: first, lease: nil)
                _ = try await PG.sql(
                    "UPDATE \(unescaped: "\"\(schema)\".sessions") SET sealed = \(old) WHERE key = 'a'")
                try await expectFailure({ _ = try await storage.load("a") }) {
                    storageError($0)?.code == PostgresStorageError.tampered
                }
                let report = try await storage.check()
                #expect(report.good == 0 && report.bad.map(\.key).sorted() == ["a", "b"] && !report.isHealthy)
                // One flipped bit.
                _ = try await storage.replace(session("fresh"), key: "c")
                _ = try await PG.sql(
                    "UPDATE \(unescaped: "\"\(schema)\".sessions") SET sealed = set_byte(sealed, 20, get_byte(sealed, 20) # 1) WHERE key = 'c'"
                )
                #expect(
                    try await storage.check().bad.contains {
                        $0.key == "c" && $0.error.code == PostgresStorageError.tampered
                    })
            }
        }

        @Test func aWrongMasterKeyIsRefusedAndChangesNothing() async throws {
            let schema = PG.freshSchema()
            defer { Task { await PG.dropSchema(schema) } }
            try await Fleet.with { fleet in
                let right = try fleet.storage(try PG.direct(schema: schema), key: try randomKey())
                _ = try await right.replace(session("a1"), key: "a")
                let wrong = try fleet.storage(try PG.direct(schema: schema), key: try randomKey())
                try await expectFailure({ try await wrong.prepare() }) {
                    ($0 as? PostgresStorageError)?.code == PostgresStorageError.wrongKey
                }
                try await expectFailure({ _ = try await wrong.load("a") }) {
                    ($0 as? OAuthError)?.code == OAuthError.storeUnavailable
                }
                #expect(try await right.load("a")?.session.tokens.accessToken == "a1")
            }
        }

        /// Data key rotation seals every session again and retires the old key; a replica that still
        /// seals with the old key is refused by the foreign key, reloads and writes. Master key
        /// rotation: the old key no longer opens the store, the new one does.
        @Test func keyRotation() async throws {
            let schema = PG.freshSchema()
            defer { Task { await PG.dropSchema(schema) } }
            let key = try randomKey()
            try await Fleet.with { fleet in
                let a = try fleet.storage(try PG.direct(schema: schema), key: key)
                let b = try fleet.storage(try PG.direct(schema: schema), key: key)
                var generations: [String: Int64] = [:]
                for name in ["x", "y", "z"] {
                    generations[name] = try await a.replace(session("at-\(name)"), key: name)
                }
                try await b.prepare() // b caches data key 1
                #expect(try await a.rotateDataKey() == 3)
                let keys = try await PG.sql("SELECT id FROM \(unescaped: "\"\(schema)\".data_keys")").map {
                    try $0.decode(Int64.self)
                }
                #expect(keys == [2], "the old data key was not retired: \(keys)")
                for name in ["x", "y", "z"] {
                    let stored = try #require(try await a.load(name))
                    #expect(
                        stored.session.tokens.accessToken == "at-\(name)" && stored.generation == generations[name],
                        "rotation changed a generation")
                }
                // b still seals with key 1, which is gone: the write is refused, b reloads, seals again.
                let written = try await b.save(
                    session("from-b"), key: "x", expectedGeneration: generations["x"], lease: nil)
                #expect(
                    try await a.load("x")?.session.tokens.accessToken == "from-b"
                        && written == (generations["x"] ?? 0) + 1)
                let report = try await a.check()
                #expect(report.good == 3 && report.isHealthy)

                let newKey = try randomKey()
                try await a.rotateMasterKey(to: newKey)
                let old = try fleet.storage(try PG.direct(schema: schema), key: key)
                try await expectFailure({ try await old.prepare() }) {
                    ($0 as? PostgresStorageError)?.code == PostgresStorageError.wrongKey
                }
                let fresh = try fleet.storage(try PG.direct(schema: schema), key: newKey)
                #expect(try await fresh.load("y")?.session.tokens.accessToken == "at-y")
            }
        }

        @Test func masterKeysFromAFileTheEnvironmentOrAPassphrase() async throws {
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
                "moose-pg-keys-\(UUID().uuidString)")
            defer { try? FileManager.default.removeItem(at: folder) }
            let keyFile = folder.appendingPathComponent("store.key").path
            let schemas = [PG.freshSchema(), PG.freshSchema(), PG.freshSchema()]
            defer { Task { for schema in schemas { await PG.dropSchema(schema) } } }
            try await Fleet.with { fleet in
                let file = try fleet.storage(try PG.direct(schema: schemas[0]), key: .keyFile(keyFile))
                _ = try await file.replace(session("f"), key: "k")
                let attributes = try FileManager.default.attributesOfItem(atPath: keyFile)
                #expect((attributes[.posixPermissions] as? Int) == 0o600, "the key file was created readable by others")
                #expect(
                    try await fleet.storage(try PG.direct(schema: schemas[0]), key: .keyFile(keyFile)).load("k")?
                        .session.tokens.accessToken == "f")

                setenv("MOOSE_PG_TEST_KEY", try SecureRandom.bytes(count: 32).base64, 1)
                let environment = try fleet.storage(
                    try PG.direct(schema: schemas[1]), key: .environment("MOOSE_PG_TEST_KEY"))
                _ = try await environment.replace(session("e"), key: "k")
                #expect(
                    try await fleet.storage(try PG.direct(schema: schemas[1]), key: .environment("MOOSE_PG_TEST_KEY"))
                        .load("k")?.session.tokens.accessToken == "e")

                let phrase = try fleet.storage(
                    try PG.direct(schema: schemas[2]), key: .passphrase("correct horse battery staple"))
                _ = try await phrase.replace(session("p"), key: "k")
                #expect(
                    try await fleet.storage(
                        try PG.direct(schema: schemas[2]), key: .passphrase("correct horse battery staple")
                    ).load("k")?.session.tokens.accessToken == "p")
                let wrongPhrase = try fleet.storage(try PG.direct(schema: schemas[2]), key: .passphrase("wrong horse"))
                try await expectFailure({ try await wrongPhrase.prepare() }) {
                    ($0 as? PostgresStorageError)?.code == PostgresStorageError.wrongKey
                }
                // A store that needs a key file nobody has: no new key is made up.
                let missing = try fleet.storage(try PG.direct(schema: schemas[0]), key: .keyFile(keyFile + ".missing"))
                try await expectFailure({ try await missing.prepare() }) {
                    ($0 as? PostgresStorageError)?.code == PostgresStorageError.keyUnavailable
                }
            }
        }

        /// Forward-only migrations: a newer schema is refused and left as it is; `verify` never runs DDL;
        /// replicas starting together migrate once.
        @Test func migrations() async throws {
            let schema = PG.freshSchema(), empty = PG.freshSchema()
            defer {
                Task {
                    await PG.dropSchema(schema); await PG.dropSchema(empty)
                }
            }
            let key = try randomKey()
            try await Fleet.with { fleet in
                let replicas = try (0..<6).map { _ in try fleet.storage(try PG.direct(schema: schema), key: key) }
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for replica in replicas { group.addTask { try await replica.prepare() } }
                    try await group.waitForAll()
                }
                _ = try await replicas[0].replace(session("m"), key: "k")
                #expect(
                    try await replicas[5].load("k")?.session.tokens.accessToken == "m",
                    "replicas opened different stores")
                let versions = try await PG.sql("SELECT version FROM \(unescaped: "\"\(schema)\".migrations")").map {
                    try $0.decode(Int32.self)
                }
                #expect(versions == [Int32(PostgresSessionStorage.schemaVersion)])

                _ = try await PG.sql(
                    "INSERT INTO \(unescaped: "\"\(schema)\".migrations") (version, description) VALUES (99, 'from the future')"
                )
                let before = try await PG.sql("SELECT generation, sealed FROM \(unescaped: "\"\(schema)\".sessions")")
                    .map { try $0.decode((Int64, ByteBuffer).self) }
                let newer = try fleet.storage(try PG.direct(schema: schema), key: key)
                try await expectFailure({ try await newer.prepare() }) {
                    ($0 as? PostgresStorageError)?.code == PostgresStorageError.unsupportedVersion
                }
                let after = try await PG.sql("SELECT generation, sealed FROM \(unescaped: "\"\(schema)\".sessions")")
                    .map { try $0.decode((Int64, ByteBuffer).self) }
                #expect(before.map(\.0) == after.map(\.0) && before.map(\.1) == after.map(\.1))

                let verifying = try fleet.storage(try PG.direct(schema: empty, "migrations=verify"), key: key)
                try await expectFailure({ try await verifying.prepare() }) {
                    ($0 as? PostgresStorageError)?.code == PostgresStorageError.notMigrated
                }
                let exists = try await PG.sql("SELECT to_regnamespace(\(empty)) IS NOT NULL").first?.decode(Bool.self)
                #expect(exists == false, "migrations=verify created the schema")
            }
        }

        /// sslmode as libpq users know it, against the test server's certificate (SAN 127.0.0.1 and localhost).
        @Test func tlsModes() async throws {
            let servers = try PG.require()
            let schema = PG.freshSchema()
            defer { Task { await PG.dropSchema(schema) } }
            let key = try randomKey()
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
                "moose-pg-ca-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: folder) }
            let otherCA = folder.appendingPathComponent("other-ca.pem").path
            let (status, output) = PG.run(
                "/usr/bin/openssl",
                [
                    "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", folder.appendingPathComponent("k.pem").path, "-out", otherCA,
                    "-days", "2", "-subj", "/CN=Not The Test CA"
                ])
            try #require(status == 0, "openssl: \(output)")
            let localhost = servers.url.replacingOccurrences(of: "127.0.0.1", with: "localhost")
            try await Fleet.with { fleet in
                for url in [
                    PG.url(servers.url, schema: schema, "sslmode=verify-full&sslrootcert=\(servers.ca)"),
                    PG.url(localhost, schema: schema, "sslmode=verify-full&sslrootcert=\(servers.ca)"),
                    PG.url(servers.url, schema: schema, "sslmode=verify-ca&sslrootcert=\(servers.ca)"),
                    PG.url(servers.url, schema: schema, "sslmode=require"),
                    PG.url(servers.url, schema: schema, "sslmode=disable")
                ] {
                    let storage = try fleet.storage(url, key: key)
                    _ = try await storage.replace(session("tls"), key: "k")
                    #expect(try await storage.load("k") != nil, "\(url)")
                }
                for mode in ["verify-full", "verify-ca"] {
                    let refused = try fleet.storage(
                        PG.url(servers.url, schema: schema, "sslmode=\(mode)&sslrootcert=\(otherCA)"), key: key)
                    try await expectFailure({ try await refused.prepare() }) { error in
                        let error = error as? PostgresStorageError
                        return error?.code == PostgresStorageError.unavailable && error?.message.contains("TLS") == true
                    }
                }
                #expect(throws: PostgresStorageError.self) {
                    _ = try PostgresSessionStorage(
                        url: PG.url(servers.url, schema: schema, "sslmode=verify-full&sslrootcert=/nonexistent.pem"),
                        masterKey: key)
                }
            }
        }

        @Test func urlsAreParsedStrictlyAndPasswordsNeverShow() throws {
            let parsed = try PostgresStorageConfiguration(
                url:
                    "postgresql://app%40corp:s3cr%3At@db.example.com:6543/sessions?sslmode=verify-ca&sslrootcert=/etc/ca.pem&schema=fleet&pool_max=4&listen_port=5432&connect_timeout=2.5"
            )
            #expect(parsed.username == "app@corp" && parsed.password == "s3cr:t" && parsed.database == "sessions")
            #expect(
                parsed.endpoint == .tcp(host: "db.example.com", port: 6543)
                    && parsed.listenEndpoint == .tcp(host: "db.example.com", port: 5432))
            #expect(parsed.tls == .verifyCA && parsed.rootCertificateFile == "/etc/ca.pem" && parsed.schema == "fleet")
            #expect(parsed.maximumConnections == 4 && parsed.connectTimeout == 2.5)
            #expect(!parsed.description.contains("s3cr") && parsed.redactedURL.contains(":***@"))
            #expect(
                try PostgresStorageConfiguration(url: "postgres://u@db.example.com/d").tls == .verifyFull,
                "TLS must be verified by default off loopback")
            #expect(try PostgresStorageConfiguration(url: "postgres://u@127.0.0.1/d").tls == .prefer)
            #expect(
                try PostgresStorageConfiguration(url: "postgres://u@[::1]:5433/d").endpoint
                    == .tcp(host: "::1", port: 5433))
            #expect(
                try PostgresStorageConfiguration(url: "postgres://u@/d?host=/var/run/postgresql").endpoint
                    == .unixSocket(path: "/var/run/postgresql/.s.PGSQL.5432"))
            for bad in [
                "postgres://u:hunter2@h/d?sslmod=verify-full", "postgres://u:hunter2@h/d?sslmode=verify",
                "postgres://u:hunter2@h:99999/d",
                "postgres://u:hunter2@h/d?schema=Robert');DROP", "postgres://u:hunter2@h/d?password=hunter2",
                "http://u:hunter2@h/d",
                "postgres://u:hunter2@h/d/e", "postgres://u:hunter2@h/d?pool_max=0", "postgres://:hunter2@h/d",
                "postgres://u:hunter2%zz@h/d"
            ] {
                do {
                    _ = try PostgresStorageConfiguration(url: bad)
                    Issue.record("accepted \(bad)")
                } catch {
                    #expect(error.code == PostgresStorageError.invalidConfiguration)
                    #expect(!error.description.contains("hunter2"), "the password appeared in: \(error)")
                }
            }
        }

        @Test func withoutRunTheStorageSaysSo() async throws {
            let storage = try PostgresSessionStorage(
                url: try PG.direct(schema: PG.freshSchema()), masterKey: try randomKey())
            try await expectFailure({ _ = try await storage.load("k") }) { error in
                (error as? OAuthError)?.code == OAuthError.storeUnavailable && "\(error)".contains("run()")
            }
        }

        /// A released lease is announced: a waiter in another replica takes it at once, not at its
        /// next poll. Through PgBouncer with LISTEN on its own port, notifications are detected as
        /// not arriving and waiters poll.
        @Test func releasedLeasesWakeWaitersInOtherReplicas() async throws {
            let schema = PG.freshSchema()
            defer { Task { await PG.dropSchema(schema) } }
            let key = try randomKey()
            try await Fleet.with { fleet in
                let a = try fleet.storage(try PG.direct(schema: schema, "listen=off"), key: key)
                var settings = try PostgresStorageConfiguration(url: try PG.direct(schema: schema))
                settings.pollInterval = 30 // without a notification, the waiter would sleep up to 30 s
                let b = try PostgresSessionStorage(configuration: settings, masterKey: key)
                let running = Task { await b.run() }
                defer { running.cancel() }
                try await b.prepare()
                let deadline = Date().addingTimeInterval(10)
                while !b.notificationsAreLive, Date() < deadline { try await Task.sleep(nanoseconds: 20_000_000) }
                #expect(b.notificationsAreLive, "the probe notification never came back on a direct connection")
                let held = try await a.acquireLease("refresh:n", ttl: 30, timeout: 1)
                let releasedAt = Mutex<Date?>(nil)
                let releaser = Task {
                    try await Task.sleep(nanoseconds: 1_000_000_000)
                    releasedAt.withLock { $0 = Date() }
                    try await a.releaseLease(held)
                }
                let taken = try await b.acquireLease("refresh:n", ttl: 30, timeout: 60)
                let waited = Date().timeIntervalSince(try #require(releasedAt.withLock { $0 }))
                try await releaser.value
                #expect(taken.fencingToken == held.fencingToken + 1)
                #expect(waited < 10, "the waiter took \(waited) s after the release: the notification did not wake it")

                let pooled = try fleet.storage(PG.url(try PG.require().bouncerURL, schema: schema), key: key)
                try await pooled.prepare()
                try await Task.sleep(nanoseconds: 4_000_000_000)
                #expect(!pooled.notificationsAreLive, "LISTEN through PgBouncer in transaction mode was taken for live")
                try await b.releaseLease(taken)
            }
        }
    }
}

extension [UInt8] {
    var base64: String { Data(self).base64EncodedString() }
}
#endif
