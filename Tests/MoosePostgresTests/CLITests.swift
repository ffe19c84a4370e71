#if MoosePostgres
import Foundation
import MooseCrypto
import MooseOAuth
import MoosePostgres
import MooseTestSupport
import PostgresNIO
import Testing

/// The built `moose` binary (`$MOOSE_BIN`, or next to the tests).
enum MooseBinary {
    static let path: String = {
        if let path = ProcessInfo.processInfo.environment["MOOSE_BIN"],
            FileManager.default.isExecutableFile(atPath: path)
        {
            return path
        }
        return URL(fileURLWithPath: WorkerBinary.path).deletingLastPathComponent().appendingPathComponent("moose").path
    }()
}

/// One "machine": its own home (XDG folders), the shared store URL and master key in its environment.
struct Machine {
    let home = FileManager.default.temporaryDirectory.appendingPathComponent("moose-pg-machine-\(UUID().uuidString)")
    let environment: [String: String]

    init(store: String?, key: String) {
        var environment = [
            "XDG_DATA_HOME": home.appendingPathComponent("data").path,
            "XDG_CONFIG_HOME": home.appendingPathComponent("config").path,
            "BROWSER": TestIdentityProvider.browserCommand, "MOOSE_STORE_KEY": key
        ]
        if let store { environment["MOOSE_STORE"] = store }
        self.environment = environment
    }

    /// Runs `moose arguments…`; fails the test if the database password shows anywhere.
    func moose(_ arguments: [String], timeout: TimeInterval = 60, sourceLocation: SourceLocation = #_sourceLocation)
        -> (status: Int32, output: String)
    {
        let (status, output) = PG.run(MooseBinary.path, arguments, environment: environment, timeout: timeout)
        #expect(
            !output.contains(PG.password),
            "the database password appeared in the output of moose \(arguments.first ?? "")",
            sourceLocation: sourceLocation)
        return (status, output)
    }

    func cleanUp() { try? FileManager.default.removeItem(at: home) }
}

extension PostgresTests {
    @Suite struct CLI {
        /// Two machines share one session through `--store postgres://…` / `MOOSE_STORE`: login on
        /// one, status, token and refresh on both, six scripts at once cause one refresh, logout
        /// on the other; `moose store check` works there too.
        @Test func scriptsOnSeveralMachinesShareOneSession() async throws {
            let schema = PG.freshSchema()
            defer { Task { await PG.dropSchema(schema) } }
            let url = try PG.direct(schema: schema)
            let key = try SecureRandom.bytes(count: 32).base64
            let a = Machine(store: nil, key: key), b = Machine(store: url, key: key)
            defer { a.cleanUp(); b.cleanUp() }

            let login = a.moose(["login", "--store", url, "--issuer", IdP.issuer, "--client-id", "moose-cli"])
            #expect(login.status == 0, "\(login.output)")
            let status = b.moose(["status", "--json"])
            #expect(status.status == 0 && status.output.contains("active"), "\(status.output)")
            let cached = b.moose(["token"])
            #expect(cached.status == 0 && !cached.output.isEmpty)
            #expect(a.moose(["token", "--store", url]).output == cached.output, "two machines saw different sessions")

            // Expire the shared session (as time would), then six scripts on two machines ask at once.
            let first = try await PostgresSessionStorage.withRunning(
                try PostgresStorageConfiguration(url: url),
                masterKey: .raw(try #require(Data(base64Encoded: key)).map { $0 })
            ) { storage in
                let stored = try #require(try await storage.load("default"))
                var session = stored.session
                session.tokens.expiresAt = Date().addingTimeInterval(-5)
                _ = try await storage.save(session, key: "default", expectedGeneration: stored.generation, lease: nil)
                return session.tokens.refreshToken ?? ""
            }
            let results = await withTaskGroup(of: (Int32, String).self) { group in
                for index in 0..<6 {
                    let machine = index % 2 == 0 ? a : b
                    group.addTask {
                        machine.moose(
                            index % 2 == 0
                                ? ["token", "--store", url, "--format", "json"] : ["token", "--format", "json"])
                    }
                }
                var all: [(Int32, String)] = []
                for await result in group { all.append(result) }
                return all
            }
            #expect(results.allSatisfy { $0.0 == 0 }, "\(results.map(\.1))")
            let values = Set(
                results.compactMap { (try? JSONSerialization.jsonObject(with: Data($0.1.utf8))) as? [String: Any] }
                    .compactMap { $0["token"] as? String })
            #expect(values.count == 1, "the scripts got different tokens")
            #expect(IdP.familySize(of: first) == 2, "more than one refresh at the provider")

            let refresh = a.moose(["refresh", "--store", url])
            #expect(refresh.status == 0 && refresh.output.contains("refresh token rotated"), "\(refresh.output)")
            #expect(IdP.familySize(of: first) == 3)
            let check = b.moose(["store", "check"])
            #expect(check.status == 0 && check.output.contains("1 sessions open, 0 do not"), "\(check.output)")
            let list = b.moose(["store", "list"])
            #expect(list.status == 2 && list.output.contains("needs a file store"), "\(list.output)")
            let logout = b.moose(["logout"])
            #expect(logout.status == 0, "\(logout.output)")
            // Issue 40/42: the settings are kept on PostgreSQL too (beside the config file), so a plain
            // `moose login` logs in the same way again.
            #expect(logout.output.contains("Its settings are kept: moose login logs in again."), "\(logout.output)")
            #expect(a.moose(["status", "--store", url]).output.contains("no sessions"))
            #expect(a.moose(["token", "--store", url]).status == 1)
            // Issue 40 §1: the plan is kept in the shared store, so a third machine that never logged in
            // (no config, no kept settings of its own) logs in the same way with a plain `moose login`.
            let c = Machine(store: url, key: key)
            defer { c.cleanUp() }
            let seen = c.moose(["status"]).output
            #expect(seen.contains("no sessions; logged out of default (settings kept)"), "\(seen)")
            let again = c.moose(["login", "--timeout", "60"])
            #expect(
                again.status == 0 && again.output.contains("Logged in to \(IdP.issuer)")
                    && again.output.contains("(profile default)"),
                "\(again.output)")
            #expect(a.moose(["token", "--store", url]).status == 0, "machine a sees the new login")
        }

        /// Issue "One session, whatever made it", §1: a workload session (a pod's projected token file,
        /// the JWT bearer grant at authgent, which takes each assertion once) made on one machine is
        /// renewed by a fleet of three from the plan stored with it — exactly one exchange: a second
        /// would replay the assertion and be refused.
        @Test func threeMachinesRenewAWorkloadSessionWithOneExchange() async throws {
            let schema = PG.freshSchema()
            defer { Task { await PG.dropSchema(schema) } }
            let url = try PG.direct(schema: schema)
            let key = try SecureRandom.bytes(count: 32).base64
            let machines = (0..<3).map { _ in Machine(store: url, key: key) }
            defer { for machine in machines { machine.cleanUp() } }
            let tokenFile = FileManager.default.temporaryDirectory.appendingPathComponent(
                "moose-pg-pod-token-\(UUID().uuidString)")
            defer { try? FileManager.default.removeItem(at: tokenFile) }
            try Data(try await WorkloadPlatform.mint().utf8).write(to: tokenFile)
            let login = machines[0].moose([
                "login", "--workload", "file:" + tokenFile.path, "--workload-grant", "jwt-bearer",
                "--issuer", WorkloadPlatform.issuer, "--client-id", "moose-ci"
            ])
            #expect(login.status == 0, "\(login.output)")
            let first = machines[1].moose(["token"])
            #expect(first.status == 0 && !first.output.isEmpty, "\(first.output)")

            // The kubelet rotates the file; the session expires; every machine asks at once.
            try Data(try await WorkloadPlatform.mint().utf8).write(to: tokenFile)
            try await PostgresSessionStorage.withRunning(
                try PostgresStorageConfiguration(url: url),
                masterKey: .raw(try #require(Data(base64Encoded: key)).map { $0 })
            ) { storage in
                let stored = try #require(try await storage.load("default"))
                var session = stored.session
                session.tokens.expiresAt = Date().addingTimeInterval(-5)
                _ = try await storage.save(session, key: "default", expectedGeneration: stored.generation, lease: nil)
            }
            let results = await withTaskGroup(of: (Int32, String).self) { group in
                for machine in machines { group.addTask { machine.moose(["token"]) } }
                var all: [(Int32, String)] = []
                for await result in group { all.append(result) }
                return all
            }
            #expect(results.allSatisfy { $0.0 == 0 }, "a second exchange replayed the assertion: \(results.map(\.1))")
            let tokens = Set(results.map { $0.1.trimmingCharacters(in: .whitespacesAndNewlines) })
            #expect(
                tokens.count == 1 && !tokens.contains(first.output.trimmingCharacters(in: .whitespacesAndNewlines)),
                "\(tokens.count) tokens among three machines")
        }

        /// Issue 40 §1: a logout on PostgreSQL keeps the plan, and a plain `moose login --profile P` logs
        /// in the same way again (no --issuer, no --client-id; the settings are kept beside the config file).
        @Test func aLogoutOnPostgreSQLKeepsThePlanAndAPlainLoginLogsInAgain() async throws {
            let schema = PG.freshSchema()
            defer { Task { await PG.dropSchema(schema) } }
            let url = try PG.direct(schema: schema)
            let key = try SecureRandom.bytes(count: 32).base64
            let machine = Machine(store: url, key: key)
            defer { machine.cleanUp() }
            let login = machine.moose([
                "login", "--profile", "pgkept", "--issuer", IdP.issuer, "--client-id", "moose-cli", "--scope", "openid",
                "--scope", "profile"
            ])
            #expect(login.status == 0, "\(login.output)")
            let logout = machine.moose(["logout", "--profile", "pgkept"])
            #expect(logout.status == 0 && logout.output.contains("settings are kept"), "\(logout.output)")
            let again = machine.moose(["login", "--profile", "pgkept"])
            #expect(again.status == 0 && again.output.contains("Logged in to \(IdP.issuer)"), "\(again.output)")
            #expect(again.output.contains("scopes: openid profile"), "the kept scopes were not used: \(again.output)")
        }

        /// `moose store check` names a session that does not open; the exit status says so.
        @Test func storeCheckFindsATamperedSession() async throws {
            let schema = PG.freshSchema()
            defer { Task { await PG.dropSchema(schema) } }
            let url = try PG.direct(schema: schema)
            let key = try SecureRandom.bytes(count: 32).base64
            let machine = Machine(store: url, key: key)
            defer { machine.cleanUp() }
            #expect(machine.moose(["store", "init"]).status == 0)
            try await PostgresSessionStorage.withRunning(
                try PostgresStorageConfiguration(url: url),
                masterKey: .raw(try #require(Data(base64Encoded: key)).map { $0 })
            ) { storage in
                _ = try await storage.replace(session("good"), key: "good")
                _ = try await storage.replace(session("bad"), key: "bad")
            }
            _ = try await PG.sql(
                "UPDATE \(unescaped: "\"\(schema)\".sessions") SET sealed = set_byte(sealed, 30, get_byte(sealed, 30) # 4) WHERE key = 'bad'"
            )
            let check = machine.moose(["store", "check"])
            #expect(
                check.status == 1 && check.output.contains("BAD  moose.session/bad: tampered")
                    && check.output.contains("1 sessions open, 1 do not"),
                "\(check.output)")
            let rotate = machine.moose(["store", "rotate-key"])
            #expect(rotate.status == 1, "rotating over a tampered session must fail: \(rotate.output)")
        }

        /// A wrong password, an unknown parameter, a database that is down: clear errors, never the password.
        @Test func passwordsNeverAppear() throws {
            let servers = try PG.require()
            let key = try SecureRandom.bytes(count: 32).base64
            let wrong =
                servers.url.replacingOccurrences(of: PG.password, with: "not-the-" + PG.password) + "?connect_timeout=3"
            let machine = Machine(store: nil, key: key)
            defer { machine.cleanUp() }
            let refused = machine.moose(["status", "--store", wrong])
            #expect(
                refused.status == 1 && refused.output.contains("password authentication failed"), "\(refused.output)")
            let typo = machine.moose(["status", "--store", servers.url + "?sslmod=verify-full"])
            #expect(typo.status == 2 && typo.output.contains("unknown URL parameter"), "\(typo.output)")
            let closed = servers.url.replacingOccurrences(of: ":\(servers.port)/", with: ":1/") + "?connect_timeout=1"
            let down = machine.moose(["token", "--store", closed])
            #expect(
                down.status == 1 && down.output.contains("postgres://moose:***@127.0.0.1:1/moose"), "\(down.output)")
        }
    }
}
#endif
