public import Foundation

/// The second, independent test identity provider: Glewlwyd 2.7.5 (tools/glewlwyd), with DPoP
/// (nonces mandatory), PAR, RFC 9207 `iss`, registration and `resource`.
///
/// `issuer` is `$MOOSE_GLEWLWYD_ISSUER` when tools/test started it, else tools/glewlwyd/start runs
/// (idempotent); `nil` when it cannot run here (tests then skip and say why).
public enum Glewlwyd {
    /// `http://127.0.0.1:4594/api/oidc` (PAR allowed, not required).
    public static let issuer: String? = {
        if let issuer = ProcessInfo.processInfo.environment["MOOSE_GLEWLWYD_ISSUER"], !issuer.isEmpty { return issuer }
        let (status, output) = runCapturingStdout(Fixtures.root.replacingOccurrences(of: "/Fixtures", with: "/tools/glewlwyd/start"))
        guard status == 0, let issuer = output.split(separator: "\n").last.map(String.init), issuer.hasPrefix("http") else { return nil }
        return issuer
    }()

    /// The instance that requires pushed authorization requests (`…/api/oidc-par`).
    public static var parIssuer: String? { issuer.map { $0 + "-par" } }

    /// Why the Glewlwyd tests cannot run, for a skip message.
    public static let unavailable = "Glewlwyd (tools/glewlwyd/start) could not start here"

    /// The loopback port its clients registered (exact match, no RFC 8252 any-port).
    public static let redirectPort: UInt16 = 53682

    /// Signs in as alice on Glewlwyd's REST login and delivers the redirect to the loopback
    /// listener (tools/glewlwyd/browser.py), as a user's browser would.
    public static func signIn(_ authorizationURL: URL) throws {
        let script = Fixtures.root.replacingOccurrences(of: "/Fixtures", with: "/tools/glewlwyd/browser.py")
        let (status, output) = runCapturingStdout(["python3", script, authorizationURL.absoluteString])
        guard status == 0 else { throw GlewlwydError(message: "browser.py exited \(status): \(output)") }
    }

    struct GlewlwydError: Error, CustomStringConvertible {
        let message: String
        var description: String { message }
    }
}

extension Glewlwyd {
    /// Runs `body` while no other test uses Glewlwyd: its logins share one user, its clients one
    /// fixed loopback port (53682), and its SQLite database answers 500 to writes that collide —
    /// suites in different test targets run in parallel in one process, so they take turns here.
    public static func exclusively<T: Sendable>(_ body: @Sendable () async throws -> T) async throws -> T {
        await turns.acquire()
        do {
            let result = try await body()
            await turns.release()
            return result
        } catch {
            await turns.release()
            throw error
        }
    }

    private static let turns = Turns()

    /// A FIFO async lock.
    actor Turns {
        private var busy = false
        private var waiting: [CheckedContinuation<Void, Never>] = []

        func acquire() async {
            if !busy { busy = true; return }
            await withCheckedContinuation { waiting.append($0) }
        }

        func release() {
            if waiting.isEmpty { busy = false } else { waiting.removeFirst().resume() }
        }
    }
}
