import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The repository's test identity provider (tools/idp: django-oauth-toolkit on 127.0.0.1).
///
/// `issuer` is `$MOOSE_IDP_ISSUER` when tools/test started the provider, otherwise this starts it
/// (tools/idp/start is idempotent) and returns the issuer it printed.
public enum TestIdentityProvider {
    /// The issuer, e.g. `http://127.0.0.1:8765`.
    public static let issuer: String = {
        if let issuer = ProcessInfo.processInfo.environment["MOOSE_IDP_ISSUER"], !issuer.isEmpty { return issuer }
        let script = Fixtures.root.replacingOccurrences(of: "/Fixtures", with: "/tools/idp/start")
        // posix_spawn + waitpid rather than Foundation's Process: its waitUntilExit never returned
        // here when called from a Swift Testing task (the child stayed a zombie, unreaped).
        let (status, output) = runCapturingStdout(script)
        guard status == 0, let issuer = output.split(separator: "\n").last.map(String.init), issuer.hasPrefix("http")
        else {
            fatalError("tools/idp/start failed (status \(status)): \(output)")
        }
        return issuer
    }()

    /// The scripted browser for `$BROWSER` (tools/idp/headless_browser.py), as a command line.
    public static var browserCommand: String {
        "python3 " + Fixtures.root.replacingOccurrences(of: "/Fixtures", with: "/tools/idp/headless_browser.py")
    }
}

/// Runs `path` (no arguments), returning its exit status and standard output (stderr is inherited).
public func runCapturingStdout(_ path: String) -> (Int32, String) { runCapturingStdout([path]) }

/// Runs `argv[0]` (a path, or a name looked up on `PATH`) with the rest as arguments (no shell),
/// returning its exit status and standard output (stderr is inherited).
public func runCapturingStdout(_ argv: [String]) -> (Int32, String) { runProcess(argv) }
