import Foundation
import MooseTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Issue "Nothing a person set up is lost" §4 and §5: no silent waits (a browser login with no browser
/// that could start), every store fault said as what it is (never "no profiles yet"), nothing left on
/// disk by a login that failed, and a `$MOOSE_CONFIG` that names no file said, not ignored.
@Suite(.serialized)
struct NoDeadEndCLITests {
    /// The store file and key file a default home would hold.
    static func storeFiles(_ home: URL) -> [String] {
        [
            home.appendingPathComponent("data/moose/store.sqlite").path,
            home.appendingPathComponent("config/moose/store.key").path
        ]
    }

    /// A profile with no session, in a store that holds others: the login that works as pasted
    /// (nothing says its issuer and client yet) and the profiles there are, not a bare `moose login`
    /// (which logs in the default profile, or asks for an issuer).
    @Test func aProfileWithoutASessionNamesTheLoginThatWorksAndTheOthers() async throws {
        let (home, environment) = try await CLI.logIn("moose-no-such-profile")
        defer { try? FileManager.default.removeItem(at: home) }
        for arguments in [["token", "--profile", "work"], ["status", "--profile", "work"]] {
            let result = try await CLI.run(arguments, environment: environment)
            #expect(
                result.status == 1
                    && result.stderr.contains(
                        "no session for profile work (sessions here: default; choose one with --profile); "
                            + "run moose login --profile work --issuer URL --client-id ID"),
                "\(arguments): \(result.stderr)")
        }
    }

    /// §4: no browser could start and standard input is not a terminal — the login ends at once (not after
    /// its 120 s), with the URL printed and the way to paste named; nothing is left on disk.
    @Test func noBrowserAndNoTerminalEndsAtOnceSayingHowToPaste() async throws {
        var (home, environment) = CLI.home("moose-no-browser")
        defer { try? FileManager.default.removeItem(at: home) }
        environment["BROWSER"] = "/nonexistent/browser:/bin/false"
        let started = Date()
        let result = try await CLI.run(
            ["login", "--issuer", TestIdentityProvider.issuer, "--client-id", "moose-cli", "--timeout", "120"],
            environment: environment, timeout: 150)
        // Half the login's own timeout: a login that waited for the redirect would take all of it. (Twice
        // 30 s of 60 s measured 32 s in the crowded first minute of a whole run; 0.2 s alone.)
        #expect(Date().timeIntervalSince(started) < 60, "the login waited for a redirect no browser could bring")
        #expect(result.status == 1, "\(result.stderr)")
        #expect(result.stderr.contains("/authorize/?"), "the URL was not printed: \(result.stderr)")
        #expect(
            result.stderr.contains("no browser could be started") && result.stderr.contains("--paste")
                && result.stderr.contains("standard input is not a terminal"), "\(result.stderr)")
        for file in Self.storeFiles(home) {
            #expect(!FileManager.default.fileExists(atPath: file), "a failed first login left \(file)")
        }
    }

    /// §4: `--no-browser` without a terminal says that pasting needs one (or `--paste`), then waits for
    /// the redirect (someone may open the URL on this machine).
    @Test func noBrowserWithoutATerminalSaysPastingNeedsOne() async throws {
        let (home, environment) = CLI.home("moose-no-browser-flag")
        defer { try? FileManager.default.removeItem(at: home) }
        let result = try await CLI.run(
            [
                "login", "--no-browser", "--issuer", TestIdentityProvider.issuer, "--client-id", "moose-cli",
                "--timeout", "2"
            ], environment: environment, timeout: 60)
        #expect(result.status != 0)
        #expect(
            result.stderr.contains("standard input is not a terminal, so no address can be pasted here")
                && result.stderr.contains("--paste"), "\(result.stderr)")
        // Its time out says the option that reads a pasted address, not the --no-browser it had.
        #expect(
            result.stderr.contains("[timedOut]") && result.stderr.contains("add --paste")
                && !result.stderr.contains("add --no-browser"), "\(result.stderr)")
    }

    /// §4: at a terminal, with no browser that could start, the paste prompt is offered — and the
    /// address the browser (on another machine) ended on logs in.
    @Test func atATerminalWithNoBrowserThePastePromptIsOffered() async throws {
        let (home, environment) = CLI.home("moose-no-browser-tty")
        defer { try? FileManager.default.removeItem(at: home) }
        let driver =
            PasteLoginTests.ptyPrelude(limit: 60, browser: true) + """
                read_until(b"press Enter")
                match = re.search(rb"(http://127\\.0\\.0\\.1:[0-9]+/authorize/\\?[^\\s]+)", out)
                if match and b"No browser could be started" in out:
                    env = dict(os.environ, MOOSE_BROWSER_PRINT_REDIRECT="1")
                    redirect = subprocess.run([sys.executable, browser, match.group(1).decode()], env=env,
                                              capture_output=True, text=True, timeout=60).stdout.strip()
                    os.write(fd, redirect.encode() + b"\\r")
                    read_until(b"Logged in")
                else:
                    os.kill(pid, 15)
                _, status = os.waitpid(pid, 0)
                sys.stdout.write(out.decode(errors="replace"))
                print("EXIT", os.waitstatus_to_exitcode(status))
                """
        var withoutBrowser = environment
        withoutBrowser["BROWSER"] = "/bin/false"
        let browser = LocalServer.repositoryRoot + "/tools/idp/headless_browser.py"
        let result = try await CLI.run(
            [
                "python3", "-c", driver, CLI.binary, browser, "login", "--issuer", TestIdentityProvider.issuer,
                "--client-id", "moose-cli", "--timeout", "90"
            ],
            environment: withoutBrowser, timeout: 120, executable: "/usr/bin/python3")
        let out = result.stdout.replacingOccurrences(of: "\r\n", with: "\n")
        #expect(out.contains("No browser could be started. If the browser is on another machine"), "\(out)")
        #expect(out.contains("Logged in to"), "\(out) \(result.stderr)")
        #expect(out.hasSuffix("EXIT 0\n"), "\(out)")
    }

    /// §5: a first login that fails after its usage checks — a provider that cannot be reached, a client
    /// secret variable that is not set — leaves no store and no key behind.
    @Test func aFailedFirstLoginLeavesNothingOnDisk() async throws {
        let (home, environment) = CLI.home("moose-failed-first")
        defer { try? FileManager.default.removeItem(at: home) }
        let port = try SecondIdP.freePort()
        for arguments in [
            ["login", "--issuer", "http://127.0.0.1:\(port)", "--client-id", "moose-cli"],
            [
                "login", "--issuer", TestIdentityProvider.issuer, "--client-id", "svc", "--client-credentials",
                "--client-secret-env", "MOOSE_TEST_UNSET_SECRET"
            ]
        ] {
            let result = try await CLI.run(arguments, environment: environment, timeout: 60)
            #expect(result.status != 0, "\(arguments)")
            for file in Self.storeFiles(home) {
                #expect(!FileManager.default.fileExists(atPath: file), "\(arguments) left \(file): \(result.stderr)")
            }
        }
        #expect(!FileManager.default.fileExists(atPath: home.appendingPathComponent("data/moose").path))

        // A file where the store's folder must be: the store cannot be made, and the key made for it
        // goes again (with its folder).
        try FileManager.default.createDirectory(
            at: home.appendingPathComponent("data"), withIntermediateDirectories: true)
        _ = FileManager.default.createFile(atPath: home.appendingPathComponent("data/moose").path, contents: Data())
        let blocked = try await CLI.run(
            ["login", "--issuer", TestIdentityProvider.issuer, "--client-id", "moose-cli"], environment: environment)
        #expect(blocked.status == 1, "\(blocked.stderr)")
        #expect(
            !FileManager.default.fileExists(atPath: Self.storeFiles(home)[1]), "the key was left: \(blocked.stderr)")
        #expect(!FileManager.default.fileExists(atPath: home.appendingPathComponent("config/moose").path))
        #expect(
            FileManager.default.fileExists(atPath: home.appendingPathComponent("data/moose").path),
            "the person's own file in the way was removed")
    }

    /// §5: `moose profile list` (and `show`) on a store that cannot be read says so, exit 1 — the key is
    /// gone, a folder is in the store's place, the header is damaged — never "no profiles yet"; what
    /// the config file says is still listed.
    @Test func profileListOnAStoreThatCannotBeReadSaysWhy() async throws {
        let (home, environment) = try await CLI.logIn("moose-profile-list-fault")
        defer { try? FileManager.default.removeItem(at: home) }
        let (store, key) = (Self.storeFiles(home)[0], Self.storeFiles(home)[1])
        try FileManager.default.moveItem(atPath: key, toPath: key + ".aside")
        var result = try await CLI.run(["profile", "list"], environment: environment)
        #expect(result.status == 1 && !result.stdout.contains("no profiles yet"), "\(result.stdout) \(result.stderr)")
        #expect(
            result.stderr.contains("moose store reset") && result.stderr.contains("[keyUnavailable]"),
            "\(result.stderr)")
        result = try await CLI.run(["profile", "show"], environment: environment)
        #expect(result.status == 1 && result.stderr.contains("[keyUnavailable]"), "\(result.stderr)")
        try FileManager.default.moveItem(atPath: key + ".aside", toPath: key)
        // A key in MOOSE_STORE_KEY that is no key: set it right (or unset it), not start over — a reset
        // reads the same variable and fails the same way.
        var malformed = environment
        malformed["MOOSE_STORE_KEY"] = "c2hvcnQ="
        result = try await CLI.run(["token"], environment: malformed)
        #expect(
            result.status == 1 && result.stderr.contains("MOOSE_STORE_KEY") && !result.stderr.contains("reset"),
            "\(result.stderr)")

        try FileManager.default.moveItem(atPath: store, toPath: store + ".aside")
        try FileManager.default.createDirectory(atPath: store, withIntermediateDirectories: false)
        for arguments in [["profile", "list"], ["status"]] {
            result = try await CLI.run(arguments, environment: environment)
            #expect(result.status == 1, "\(arguments): \(result.stdout) \(result.stderr)")
            #expect(result.stderr.contains("\(store) is a folder, not a store file"), "\(arguments): \(result.stderr)")
        }
        try FileManager.default.removeItem(atPath: store)
        try FileManager.default.moveItem(atPath: store + ".aside", toPath: store)

        let handle = try #require(FileHandle(forWritingAtPath: store))
        try handle.write(contentsOf: Data(repeating: 0x5A, count: 100))
        try handle.close()
        result = try await CLI.run(["profile", "list"], environment: environment)
        #expect(result.status == 1 && result.stderr.contains("[corrupt]"), "\(result.stdout) \(result.stderr)")
    }

    /// §5: a store file this user may not read is "permission denied" (`[permission]`), not "cannot open"
    /// (`[io]`). Root reads any file, so the command runs as `nobody`.
    @Test(.enabled(if: getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv")))
    func aStoreThisUserMayNotReadIsPermissionDenied() async throws {
        let (home, environment) = CLI.home("moose-store-000")
        defer { try? FileManager.default.removeItem(at: home) }
        let folder = home.appendingPathComponent("data/moose")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        for path in [home.path, home.appendingPathComponent("data").path, folder.path] { chmod(path, 0o777) }
        let store = folder.appendingPathComponent("store.sqlite").path
        #expect(
            FileManager.default.createFile(atPath: store, contents: Data("x".utf8), attributes: [.posixPermissions: 0]))
        for arguments in [["status"], ["profile", "list"]] {
            let result = try await CLI.run(
                ["/usr/bin/setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups", CLI.binary] + arguments,
                environment: environment, executable: "/usr/bin/setpriv")
            #expect(result.status == 1, "\(arguments): \(result.stdout) \(result.stderr)")
            #expect(
                result.stderr.contains("\(store): permission denied") && result.stderr.contains("[permission]"),
                "\(arguments): \(result.stderr)")
        }
    }

    /// §5: `$MOOSE_CONFIG` naming no file is said (exit 2), not silently replaced by an empty config.
    @Test func aMooseConfigThatNamesNoFileIsSaid() async throws {
        var (home, environment) = CLI.home("moose-config-missing")
        defer { try? FileManager.default.removeItem(at: home) }
        let missing = home.appendingPathComponent("typo.toml").path
        environment["MOOSE_CONFIG"] = missing
        for arguments in [["status"], ["profile", "list"], ["token"]] {
            let result = try await CLI.run(arguments, environment: environment)
            #expect(result.status == 2, "\(arguments): \(result.stdout) \(result.stderr)")
            #expect(
                result.stderr.contains("MOOSE_CONFIG names \(missing), which does not exist"),
                "\(arguments): \(result.stderr)")
        }
    }
}

/// Issue "Nothing a person set up is lost" §6: one vocabulary — `--audience` in `inspect` and `verify`
/// (`--aud` the alias of both), `verify` speaking of the token it was given (not of an Authorization
/// header) and naming `--introspect` for a token that is no JWT, and usage problems exit 2.
struct OneVocabularyCLITests {
    @Test func audienceIsOneNameInInspectAndVerify() async throws {
        // A JWT with aud "api" (not signed: decoded and its claims judged).
        func part(_ json: String) -> String {
            Data(json.utf8).base64EncodedString().replacingOccurrences(of: "=", with: "")
                .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        }
        let token = part(#"{"alg":"RS256","typ":"JWT"}"#) + "." + part(#"{"aud":"api","sub":"a"}"#) + ".c2ln"
        for name in ["--audience", "--aud"] {
            let wrong = try await CLI.run(["inspect", name, "other", token])
            #expect(wrong.status == 1, "\(name): \(wrong.stdout) \(wrong.stderr)")
            let right = try await CLI.run(["inspect", name, "api", token])
            #expect(right.status == 0 || right.status == 1, "\(name): \(right.stderr)")
            #expect(!right.stderr.contains("Unknown option"), "\(name): \(right.stderr)")
            let verify = try await CLI.run(
                ["verify", "--issuer", TestIdentityProvider.issuer, name, "api", "-"], stdin: Data("a b".utf8))
            #expect(verify.status == 1, "\(name): \(verify.stderr)")
            #expect(
                !verify.stderr.contains("Authorization") && verify.stderr.contains("this is not an access token"),
                "\(name): \(verify.stderr)")
        }
        let opaque = try await CLI.run(
            ["verify", "--issuer", TestIdentityProvider.issuer, "--audience", "api", "-"],
            stdin: Data("abcdefghijklmnopqrstuvwxyz0123456789".utf8))
        #expect(opaque.status == 1 && opaque.stderr.contains("--introspect"), "\(opaque.stderr)")
    }

    @Test func usingAProfileThatDoesNotExistIsAUsageError() async throws {
        let (home, environment) = CLI.home("moose-profile-use-unknown")
        defer { try? FileManager.default.removeItem(at: home) }
        let result = try await CLI.run(["profile", "use", "nowhere"], environment: environment)
        #expect(result.status == 2 && result.stderr.hasPrefix("moose: error: no profile nowhere"), "\(result.stderr)")
    }
}
