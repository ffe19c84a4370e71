import Foundation
import MooseTestSupport
import Testing

/// A new user's walk: the messages a person meets on the first day, each pointing at the next step,
/// driven through the real `moose` binary as that person would.
struct NewUserWalkCLITests {
    /// `moose git-credential get` for a host the config file does not map: nothing on stdout and
    /// exit 0 (git's protocol: git asks its next helper), and one note on stderr naming the host and
    /// where to map it. `docker-credential get` says the same beside docker's "not found".
    @Test func anUnmappedHostIsNamedOnStandardError() async throws {
        let (home, environment) = CLI.home("moose-unmapped-host")
        defer { try? FileManager.default.removeItem(at: home) }
        let configPath = home.appendingPathComponent("config/moose/config.toml").path
        let git = try await CLI.run(
            ["git-credential", "get"], stdin: Data("protocol=https\nhost=git.example.com\n\n".utf8),
            environment: environment)
        #expect(git.status == 0, "\(git.status) \(git.stderr)")
        #expect(git.stdout.isEmpty, "\(git.stdout)")
        #expect(
            git.stderr
                == "moose: note: no profile for git.example.com: add \"git.example.com\" = \"PROFILE\" under [hosts] in \(configPath), or pass --profile\n",
            "\(git.stderr)")
        // A host that would drive the terminal is escaped, on one line.
        let hostile = try await CLI.run(
            ["git-credential", "get"], stdin: Data("protocol=https\nhost=evil\u{1b}[2J.example.com\n\n".utf8),
            environment: environment)
        #expect(hostile.status == 0 && hostile.stdout.isEmpty, "\(hostile.status) \(hostile.stdout)")
        #expect(!hostile.stderr.contains("\u{1b}") && hostile.stderr.contains("evil\\u{1b}[2J.example.com"))
        // store and erase stay quiet (git calls them after every use).
        let store = try await CLI.run(
            ["git-credential", "store"], stdin: Data("protocol=https\nhost=git.example.com\n\n".utf8),
            environment: environment)
        #expect(store.status == 0 && store.stdout.isEmpty && store.stderr.isEmpty, "\(store.stderr)")
        let docker = try await CLI.run(
            ["docker-credential", "get"], stdin: Data("https://registry.example.com\n".utf8),
            environment: environment)
        #expect(docker.status == 1, "\(docker.status) \(docker.stderr)")
        #expect(docker.stdout == "credentials not found in native keychain\n", "\(docker.stdout)")
        #expect(
            docker.stderr.contains(
                "moose: note: no profile for registry.example.com: add \"registry.example.com\" = \"PROFILE\" under [hosts] in \(configPath)"
            ), "\(docker.stderr)")
    }

    /// Paste mode: a bare Enter is asked again without using up one of the five tries; the fifth
    /// refused line stops the login with a next step that keeps the command's options ("the same
    /// moose login command", not a plain `moose login`, which would lose --issuer and --client-id).
    @Test func aBareEnterIsNoTryAndTheLastRefusalKeepsTheCommand() async throws {
        let (home, environment) = CLI.home("moose-paste-walk")
        defer { try? FileManager.default.removeItem(at: home) }
        let driver =
            PasteLoginTests.ptyPrelude(limit: 30) + """
                read_until(b"press Enter")
                os.write(fd, b"\\r")
                read_until(b"nothing was pasted")
                def answers():
                    return out.count(b"left)") + out.count(b"so the login stopped")
                for sent in range(1, 6):
                    before = answers()
                    out += b"[sent %d]" % sent
                    try:
                        os.write(fd, b"http://example.com/nope?code=1&state=2\\r")
                    except OSError:
                        break
                    end = time.time() + 30
                    while answers() == before and time.time() < end and b"so the login stopped" not in out:
                        read_until(b"\\x00", limit=0.5)
                read_until(b"\\x00", limit=5)
                _, status = os.waitpid(pid, 0)
                sys.stdout.write(out.decode(errors="replace"))
                print("EXIT", os.waitstatus_to_exitcode(status))
                """
        let result = try await CLI.run(
            [
                "python3", "-c", driver, CLI.binary, "login", "--no-browser", "--issuer", TestIdentityProvider.issuer,
                "--client-id", "moose-cli", "--timeout", "60"
            ],
            environment: environment, timeout: 120, executable: "/usr/bin/python3")
        let out = result.stdout.replacingOccurrences(of: "\r\n", with: "\n")
        #expect(out.contains("moose: nothing was pasted; paste the whole address and press Enter\n"), "\(out)")
        // The empty line used no try: the login stopped only after the fifth wrong address.
        let fifth = try #require(out.range(of: "[sent 5]"), "\(out)")
        #expect(out[fifth.upperBound...].contains("so the login stopped"), "\(out)")
        #expect(!out[..<fifth.lowerBound].contains("so the login stopped"), "\(out)")
        #expect(
            out.contains(
                "5 pasted lines were refused, so the login stopped: run the same moose login command again and paste the whole address"
            ), "\(out)")
        #expect(out.hasSuffix("EXIT 2\n"), "\(out)")
    }

    /// The device code banner's next step keeps the command's options: "the same moose login
    /// --device command", not a plain `moose login --device`, which would lose --issuer and --client-id.
    @Test func theDeviceBannerKeepsTheCommand() async throws {
        let (home, environment) = CLI.home("moose-device-walk")
        defer { try? FileManager.default.removeItem(at: home) }
        let login = try await CLI.run(
            [
                "login", "--device", "--no-browser", "--issuer", TestIdentityProvider.issuer, "--client-id",
                "moose-device", "--device-endpoint", TestIdentityProvider.issuer + "/device-authorization/",
                "--timeout", "2"
            ],
            environment: environment, timeout: 30)
        #expect(login.status == 1, "\(login.status) \(login.stderr)")
        #expect(
            login.stderr.contains("approve before then, or run the same moose login --device command again."),
            "\(login.stderr)")
        #expect(!login.stderr.contains("run moose login --device again"), "\(login.stderr)")
    }

    /// A browser login nobody finishes in time names the next step (sooner, --timeout, or
    /// --no-browser to paste), and the code stays last.
    @Test func aBrowserLoginThatTimesOutNamesTheNextStep() async throws {
        let (home, base) = CLI.home("moose-login-timeout")
        defer { try? FileManager.default.removeItem(at: home) }
        var environment = base
        environment["BROWSER"] = "/bin/true" // a browser that never comes back
        let login = try await CLI.run(
            ["login", "--issuer", TestIdentityProvider.issuer, "--client-id", "moose-cli", "--timeout", "2"],
            environment: environment, timeout: 30)
        #expect(login.status == 1, "\(login.status) \(login.stderr)")
        let last = login.stderr.split(separator: "\n").last.map(String.init) ?? ""
        #expect(last.hasPrefix("moose: error: no authorization redirect arrived on 127.0.0.1:"), "\(last)")
        #expect(
            last.contains(
                " in time (if the browser showed the provider's error page instead, it may not accept the "
                    + "redirect URI http://127.0.0.1:"), "\(last)")
        #expect(
            last.hasSuffix(
                "/callback: register it, or use the port it has registered); run the same moose login command "
                    + "again and finish signing in sooner "
                    + "(or give --timeout SECONDS; --port PORT for the registered redirect's port); "
                    + "with the browser on another machine, "
                    + "add --no-browser and paste the address it ends on [timedOut]"), "\(last)")
    }

    /// A login already taking a pasted address (`--paste`) that times out is not told to add
    /// `--no-browser` and paste: it was doing that.
    @Test func aPasteLoginThatTimesOutIsNotToldToPaste() async throws {
        let (home, base) = CLI.home("moose-paste-timeout")
        defer { try? FileManager.default.removeItem(at: home) }
        var environment = base
        environment["BROWSER"] = "/bin/true"
        let login = try await CLI.run(
            ["login", "--paste", "--issuer", TestIdentityProvider.issuer, "--client-id", "moose-cli", "--timeout", "2"],
            environment: environment, timeout: 30)
        #expect(login.status == 1, "\(login.status) \(login.stderr)")
        let last = login.stderr.split(separator: "\n").last.map(String.init) ?? ""
        #expect(
            last.hasSuffix(
                " it has registered); run the same moose login command again and finish signing in sooner "
                    + "(or give --timeout SECONDS), pasting the whole address the browser ends on [timedOut]"),
            "\(last)")
        #expect(!last.contains("--no-browser"), "\(last)")
    }

    /// A store fault leads with the words, and its code comes last in brackets as in every other
    /// message (not `moose: error: corrupt: …`).
    @Test func aStoreFaultEndsWithItsCode() async throws {
        let (home, environment) = CLI.home("moose-store-code")
        defer { try? FileManager.default.removeItem(at: home) }
        let folder = home.appendingPathComponent("data/moose")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let store = folder.appendingPathComponent("store.sqlite").path
        #expect(
            FileManager.default.createFile(
                atPath: store, contents: Data((0..<4096).map { _ in UInt8.random(in: 0...255) })))
        let damaged = try await CLI.run(["store", "check"], environment: environment)
        #expect(damaged.status == 1, "\(damaged.stderr)")
        #expect(damaged.stderr.hasPrefix("moose: error: \(store) is damaged or not a Moose store"), "\(damaged.stderr)")
        #expect(
            damaged.stderr.hasSuffix(" to start over with a new store (`moose store init`) [corrupt]\n"),
            "\(damaged.stderr)")
        // Given with --store, the next step names it: a plain `moose store init` inits the default store.
        let given = try await CLI.run(["token", "--store", store], environment: environment)
        #expect(given.stderr.contains("`moose store init --store '\(store)'`"), "\(given.stderr)")
        #expect(given.stderr.hasSuffix(" [corrupt]\n"), "\(given.stderr)")
        // No store there: the command that makes one, naming it (the library's words name no command).
        let absent = folder.appendingPathComponent("absent.sqlite").path
        let none = try await CLI.run(["store", "list", "--store", absent], environment: environment)
        #expect(none.status == 1, "\(none.stderr)")
        #expect(
            none.stderr.hasSuffix("no store at \(absent); `moose store init --store '\(absent)'` makes one [io]\n"),
            "\(none.stderr)")

        try FileManager.default.removeItem(atPath: store)
        try FileManager.default.createDirectory(atPath: store, withIntermediateDirectories: false)
        let folderStore = try await CLI.run(["store", "list"], environment: environment)
        #expect(folderStore.status == 1, "\(folderStore.stderr)")
        #expect(
            folderStore.stderr.hasPrefix("moose: error: \(store) is a folder, not a store file"),
            "\(folderStore.stderr)")
        #expect(folderStore.stderr.hasSuffix(" [io]\n"), "\(folderStore.stderr)")
    }

    /// `moose logout` on a store that cannot be written ends with one code, the store's own
    /// (`[permission]`), not `[permission] [storeUnavailable]`.
    @Test(.enabled(if: StoreFaultCLITests.immutableFilesWork, "chattr +i does not work in the temporary folder here"))
    func aLogoutOnAnUnwritableStoreSaysOneCode() async throws {
        let (home, environment) = try await CLI.logIn("moose-logout-unwritable")
        defer { try? FileManager.default.removeItem(at: home) }
        let store = home.appendingPathComponent("data/moose/store.sqlite").path
        try #require(StoreFaultCLITests.chattr("+i", store))
        defer { StoreFaultCLITests.chattr("-i", store) }
        let logout = try await CLI.run(["logout"], environment: environment, timeout: 60)
        #expect(logout.status == 1, "\(logout.stdout) \(logout.stderr)")
        let last = logout.stderr.split(separator: "\n").last.map(String.init) ?? ""
        #expect(last.hasPrefix("moose: error: ") && last.hasSuffix(" [permission]"), "\(logout.stderr)")
        #expect(!logout.stderr.contains("[storeUnavailable]"), "\(logout.stderr)")
        // The provider was told: the revocation is said before the local failure, with what to do.
        #expect(logout.stderr.contains("were revoked at the provider"), "\(logout.stderr)")
        #expect(logout.stderr.contains("run the same moose logout command again"), "\(logout.stderr)")
    }

    /// A provider that refuses token exchange: its OAuth error is said once, not again in parentheses.
    @Test func aRefusedExchangeSaysTheProvidersErrorOnce() async throws {
        let (home, base) = CLI.home("moose-exchange-refused")
        defer { try? FileManager.default.removeItem(at: home) }
        var environment = base
        environment["MOOSE_TEST_SUBJECT"] = "abc"
        let exchange = try await CLI.run(
            [
                "exchange", "--issuer", TestIdentityProvider.issuer, "--client-id", "moose-cli",
                "--subject-token-env", "MOOSE_TEST_SUBJECT"
            ], environment: environment, timeout: 60)
        #expect(exchange.status == 1, "\(exchange.status) \(exchange.stderr)")
        #expect(exchange.stderr.contains("(it answered unsupported_grant_type)"), "\(exchange.stderr)")
        #expect(exchange.stderr.components(separatedBy: "unsupported_grant_type").count == 2, "\(exchange.stderr)")
        #expect(exchange.stderr.hasSuffix("or use a provider that does [invalidConfiguration]\n"), "\(exchange.stderr)")
    }
}
