import Foundation
import MooseTestSupport
import Testing

/// Issue "Untrusted input", end to end through the `moose` binary against real parts.
struct UntrustedInputCLITests {
    /// The browser `moose login` starts is another, long-lived program: it inherits none of moose's
    /// descriptors — not the loopback listener (a browser holding it keeps the port bound after moose
    /// exits, and could accept a redirect itself), not the store, not a pipe. The browser here lists
    /// its own descriptors first, then signs in as the tests' browser always does.
    @Test func theBrowserInheritsNoDescriptorOfMoose() async throws {
        var (home, environment) = CLI.home("moose-cli-fds")
        defer { try? FileManager.default.removeItem(at: home) }
        try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
        let listing = home.appendingPathComponent("browser-fds.txt").path
        let script = home.appendingPathComponent("browser.sh")
        try """
        #!/bin/bash
        # This shell's descriptors (255 is bash's own copy of this script), read by a child so that
        # no redirection of the shell's own adds one: what moose handed over.
        python3 -c 'import os; d = "/proc/%d/fd" % os.getppid(); print("\\n".join(n + " " + os.readlink(d + "/" + n) for n in os.listdir(d)))' > '\(listing)'
        exec \(TestIdentityProvider.browserCommand) "$@"
        """.write(to: script, atomically: true, encoding: .utf8)
        #expect(chmod(script.path, 0o755) == 0)
        environment["BROWSER"] = script.path
        let login = try await CLI.run(
            ["login", "--issuer", TestIdentityProvider.issuer, "--client-id", "moose-cli"],
            environment: environment, timeout: 60)
        #expect(login.status == 0, "\(login.stderr)")
        let lines = try String(contentsOfFile: listing, encoding: .utf8).split(separator: "\n")
        let inherited = lines.filter { line in !["0", "1", "2", "255"].contains(String(line.prefix { $0 != " " })) }
        #expect(!lines.isEmpty && inherited.isEmpty, "the browser inherited \(inherited)")
    }

    /// `moose refresh` used to refresh first and save after: with a store that could not be written,
    /// the provider rotated the refresh token, the save failed, and the session was lost. Now it goes
    /// through the coordinator, whose lease is a write made before any refresh token is spent.
    @Test func refreshWithAnUnwritableStoreSpendsNoRefreshToken() async throws {
        let (home, environment) = try await CLI.logIn("moose-cli-unwritable")
        defer { try? FileManager.default.removeItem(at: home) }
        let session = try await CLI.storedSession(environment: environment)
        let refreshToken = try #require((session["tokens"] as? [String: Any])?["refreshToken"] as? String)
        let before = try await TokenCLITests.familySize(of: refreshToken)

        // Another process keeps the store open (its -wal and -shm exist), and this one may not grow
        // any file (RLIMIT_FSIZE 0, SIGXFSZ ignored): it can read the store but never write it.
        let store = home.appendingPathComponent("data/moose/store.sqlite").path
        let holder = TestProcess()
        holder.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        holder.arguments = [
            "python3", "-c",
            """
            import sqlite3, sys, time
            c = sqlite3.connect(sys.argv[1]); c.execute("select count(*) from sqlite_master").fetchall()
            print("open", flush=True); time.sleep(30)
            """, store
        ]
        let pipe = Pipe()
        holder.standardOutput = pipe
        try holder.run()
        defer { kill(holder.processIdentifier, SIGKILL); holder.waitUntilExit() }
        _ = pipe.fileHandleForReading.availableData // "open"

        let limited = try await CLI.run(
            ["/bin/sh", "-c", "trap '' XFSZ; ulimit -f 0; exec \"$0\" refresh", CLI.binary],
            environment: environment, timeout: 60, executable: "/bin/sh")
        #expect(limited.status == 1, "\(limited.stdout) \(limited.stderr)")
        #expect(limited.stderr.contains("no refresh token was spent"), "\(limited.stderr)")
        #expect(try await TokenCLITests.familySize(of: refreshToken) == before, "the provider saw a refresh")

        // The session is intact: an ordinary refresh still works with the stored refresh token.
        kill(holder.processIdentifier, SIGKILL)
        holder.waitUntilExit()
        let again = try await CLI.run(["refresh"], environment: environment, timeout: 60)
        #expect(again.status == 0, "\(again.stderr)")
    }

    /// A store truncated to 0 bytes is damaged: never silently re-created, and `store check` says so.
    @Test func aTruncatedStoreIsReportedAsDamaged() async throws {
        let (home, environment) = CLI.home("moose-cli-truncated")
        defer { try? FileManager.default.removeItem(at: home) }
        #expect(try await CLI.run(["store", "init"], environment: environment).status == 0)
        let store = home.appendingPathComponent("data/moose/store.sqlite").path
        #expect(truncate(store, 0) == 0)
        for arguments in [
            ["status"], ["store", "check"], ["store", "list"],
            ["login", "--issuer", TestIdentityProvider.issuer, "--client-id", "moose-cli"]
        ] {
            let result = try await CLI.run(arguments, environment: environment, timeout: 60)
            #expect(result.status == 1, "\(arguments): \(result.stdout) \(result.stderr)")
            #expect(result.stderr.contains("empty (0 bytes)"), "\(arguments): \(result.stderr)")
        }
        let size = try FileManager.default.attributesOfItem(atPath: store)[.size] as? Int
        #expect(size == 0, "the damaged file was re-created")
    }

    /// `moose token` exits 3 (not 1, "needs login") when the provider cannot be reached.
    @Test func tokenExitsThreeWhenTheProviderIsUnreachable() async throws {
        let (home, environment) = CLI.home("moose-cli-unreachable")
        defer { try? FileManager.default.removeItem(at: home) }
        #expect(try await CLI.run(["store", "init"], environment: environment).status == 0)
        // An expired session whose issuer listens nowhere (port 9 on loopback: nothing there).
        let reference = Date().timeIntervalSinceReferenceDate
        let session = """
            {"profile":{"name":"default","issuer":"http://127.0.0.1:9","clientID":"moose-cli","scopes":["openid"],
             "grant":"authorization_code","endpoints":{}},
             "tokens":{"accessToken":"expired-token","tokenType":"Bearer","refreshToken":"r1","expiresAt":\(reference - 600),
                       "scopes":["openid"],"requestedAt":\(reference - 4000)},
             "state":"active","updatedAt":\(reference - 600)}
            """
        let put = try await CLI.run(
            ["store", "put", "default", "--namespace", "moose.session"], stdin: Data(session.utf8),
            environment: environment)
        #expect(put.status == 0, "\(put.stderr)")
        let token = try await CLI.run(["token"], environment: environment, timeout: 60)
        #expect(token.status == 3, "\(token.stdout) \(token.stderr)")
        // The session is kept (nothing was spent): still "active" — rewritten in the current shape by the
        // refresh's first write (the record of the rotation in flight), which the refused connection cleared.
        let row = try await CLI.storedRow(environment: environment)
        let stored = row["session"] as? [String: Any] ?? row
        #expect(stored["state"] as? String == "active", "\(row)")
        #expect(
            (stored["attributes"] as? [String: String])?["moose.rotation-in-flight"] == nil,
            "a refused connection left a rotation record")
    }
}

struct InspectJWKSTransportTests {
    /// Keys decide what "verified" means: `--jwks` refuses plain http to another machine.
    @Test func jwksOverPlainHTTPToAnotherMachineIsRefused() async throws {
        let result = try await CLI.run(["inspect", "a.b.c", "--jwks", "http://keys.example.test/jwks.json"])
        #expect(result.status == 2 && result.stderr.contains("not https"), "\(result.stderr)")
    }
}
