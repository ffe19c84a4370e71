import Foundation
@testable import MooseCLI
import MooseTestSupport
import Testing

/// Issue "The first hour", §4: a paste mode for remote shells. Under a pseudo-terminal, `moose login
/// --no-browser` prints the URL; the "browser" (on another machine: it never reaches moose's
/// listener) signs in at the test IdP; the person pastes a wrong address (refused, asked again), then
/// the address the browser ended on — and is logged in.
struct PasteLoginTests {
    @Test func aPastedRedirectLogsInAtATerminal() async throws {
        let (home, environment) = CLI.home("moose-paste")
        defer { try? FileManager.default.removeItem(at: home) }
        let driver =
            PasteLoginTests.ptyPrelude(limit: 60, browser: true) + """
                read_until(b"press Enter")
                match = re.search(rb"(http://127\\.0\\.0\\.1:[0-9]+/authorize/\\?[^\\s]+)", out)
                if match:
                    env = dict(os.environ, MOOSE_BROWSER_PRINT_REDIRECT="1")
                    redirect = subprocess.run([sys.executable, browser, match.group(1).decode()], env=env,
                                              capture_output=True, text=True, timeout=60).stdout.strip()
                    os.write(fd, b"http://127.0.0.1:1/elsewhere?code=x&state=y\\r")
                    read_until(b"paste the whole address again")
                    os.write(fd, redirect.encode() + b"\\r")
                    read_until(b"Logged in")
                _, status = os.waitpid(pid, 0)
                sys.stdout.write(out.decode(errors="replace"))
                print("EXIT", os.waitstatus_to_exitcode(status))
                """
        let browser = LocalServer.repositoryRoot + "/tools/idp/headless_browser.py"
        let result = try await CLI.run(
            [
                "python3", "-c", driver, CLI.binary, browser, "login", "--no-browser", "--issuer",
                TestIdentityProvider.issuer,
                "--client-id", "moose-cli", "--timeout", "90"
            ],
            environment: environment, timeout: 120, executable: "/usr/bin/python3")
        #expect(result.stdout.contains("not this login's redirect"), "\(result.stdout)")
        #expect(result.stdout.contains("Logged in to"), "\(result.stdout) \(result.stderr)")
        #expect(result.stdout.hasSuffix("EXIT 0\n"), "\(result.stdout)")
        let status = try await CLI.run(["status"], environment: environment)
        #expect(status.stdout.contains("alice"), "\(status.stdout)")
    }

    /// Issue "The second hour", §1: at a provider that promises RFC 9207 `iss` (the test IdP does), the
    /// prompt asks for the whole address and says why; a bare code, an address cut before its `iss`,
    /// another address and garbage are each refused with the reason and the person pastes again —
    /// then the whole address logs in.
    @Test func theWholeAddressIsAskedForWhereTheProviderSendsIss() async throws {
        let (home, environment) = CLI.home("moose-paste-iss")
        defer { try? FileManager.default.removeItem(at: home) }
        let driver =
            PasteLoginTests.ptyPrelude(limit: 60, browser: true) + """
                read_until(b"press Enter")
                read_until(b"sent it:")
                match = re.search(rb"(http://127\\.0\\.0\\.1:[0-9]+/authorize/\\?[^\\s]+)", out)
                if match:
                    env = dict(os.environ, MOOSE_BROWSER_PRINT_REDIRECT="1")
                    redirect = subprocess.run([sys.executable, browser, match.group(1).decode()], env=env,
                                              capture_output=True, text=True, timeout=60).stdout.strip()
                    code = re.search(r"code=([^&]+)", redirect).group(1)
                    cut = re.sub(r"&iss=[^&]*", "", redirect)
                    for line, left in [(code, b"4 tries left"), (cut, b"3 tries left"),
                                       ("http://127.0.0.1:1/elsewhere?code=x&state=y", b"2 tries left"), ("%%%", b"1 try left")]:
                        os.write(fd, line.encode() + b"\\r")
                        read_until(left)
                    os.write(fd, redirect.encode() + b"\\r")
                    read_until(b"Logged in")
                _, status = os.waitpid(pid, 0)
                sys.stdout.write(out.decode(errors="replace"))
                print("EXIT", os.waitstatus_to_exitcode(status))
                """
        let browser = LocalServer.repositoryRoot + "/tools/idp/headless_browser.py"
        let result = try await CLI.run(
            [
                "python3", "-c", driver, CLI.binary, browser, "login", "--no-browser", "--issuer",
                TestIdentityProvider.issuer,
                "--client-id", "moose-cli", "--timeout", "90"
            ],
            environment: environment, timeout: 120, executable: "/usr/bin/python3")
        let out = result.stdout.replacingOccurrences(of: "\r\n", with: "\n")
        #expect(
            out.contains("paste the whole address it ends on")
                && out.contains("a code alone cannot prove which provider sent it"), "\(out)")
        #expect(!out.contains("or only the code"), "\(out)")
        #expect(out.contains("only a code?") && out.contains("4 tries left"), "\(out)")
        #expect(out.contains("that address has no iss") && out.contains("3 tries left"), "\(out)")
        #expect(out.contains("not this login's redirect") && out.contains("2 tries left"), "\(out)")
        #expect(out.contains("1 try left"), "\(out)")
        #expect(out.contains("Logged in to"), "\(out) \(result.stderr)")
        #expect(out.hasSuffix("EXIT 0\n"), "\(out)")
    }

    /// The start of a Python driver that runs `moose` (argv[1], with argv[2…]) on a pseudo-terminal:
    /// `fd` is the terminal, `out` what it printed, `read_until(needle)` reads until `needle` appears
    /// (or `limit` seconds pass, or the terminal closes).
    /// With `browser`, argv[2] is the browser script (`browser`) and moose's arguments follow it.
    static func ptyPrelude(limit: Int, browser: Bool = false) -> String {
        """
        import os, pty, re, select, subprocess, sys, time
        moose = sys.argv[1]
        \(browser ? "browser = sys.argv[2]" : "")
        pid, fd = pty.fork()
        if pid == 0:
            os.execv(moose, [moose] + sys.argv[\(browser ? 3 : 2):])
        out = b""
        def read_until(needle, limit=\(limit)):
            global out
            end = time.time() + limit
            while time.time() < end and needle not in out:
                ready, _, _ = select.select([fd], [], [], 0.5)
                if ready:
                    try:
                        chunk = os.read(fd, 4096)
                    except OSError:
                        return
                    if not chunk:
                        return
                    out += chunk

        """
    }

    /// Pasting is bounded: the fifth line that is not this login's redirect stops the login with an
    /// input error (exit 2) that says what to do.
    @Test func fiveWrongPastesStopTheLogin() async throws {
        let (home, environment) = CLI.home("moose-paste-bound")
        defer { try? FileManager.default.removeItem(at: home) }
        let driver =
            PasteLoginTests.ptyPrelude(limit: 60) + """
                read_until(b"press Enter")
                for _ in range(5):
                    os.write(fd, b"http://example.com/nope?code=1&state=2\\r")
                    time.sleep(0.3)
                read_until(b"run the same moose login command again")
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
            environment: environment, timeout: 90, executable: "/usr/bin/python3")
        #expect(result.stdout.contains("1 try left"), "\(result.stdout)")
        #expect(result.stdout.contains("so the login stopped"), "\(result.stdout)")
        #expect(result.stdout.hasSuffix("EXIT 2\n"), "\(result.stdout)")
    }
}
