import Foundation

/// The repository's test identity provider (tools/idp: django-oauth-toolkit on 127.0.0.1).
///
/// `issuer` is `$MOOSE_IDP_ISSUER` when tools/test started the provider, otherwise this starts it
/// (tools/idp/start is idempotent) and returns the issuer it printed.
public enum TestIdentityProvider {
    /// The issuer, e.g. `http://127.0.0.1:8765`.
    public static let issuer: String = {
        if let issuer = ProcessInfo.processInfo.environment["MOOSE_IDP_ISSUER"], !issuer.isEmpty { return issuer }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Fixtures.root.replacingOccurrences(of: "/Fixtures", with: "/tools/idp/start"))
        let pipe = Pipe()
        process.standardOutput = pipe
        do { try process.run() } catch { fatalError("cannot run tools/idp/start: \(error)") }
        process.waitUntilExit()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        guard process.terminationStatus == 0, let issuer = output.split(separator: "\n").last.map(String.init) else {
            fatalError("tools/idp/start failed: \(output)")
        }
        return issuer
    }()

    /// The scripted browser for `$BROWSER` (tools/idp/headless_browser.py), as a command line.
    public static var browserCommand: String {
        "python3 " + Fixtures.root.replacingOccurrences(of: "/Fixtures", with: "/tools/idp/headless_browser.py")
    }
}
