public import Foundation
public import MooseHTTP
public import MooseJWT

/// The second, independent test identity provider: Glewlwyd 2.7.5 (tools/glewlwyd), with DPoP
/// (nonces mandatory), PAR, RFC 9207 `iss`, registration and `resource`.
///
/// `issuer` is `$MOOSE_GLEWLWYD_ISSUER` when tools/test started it, else tools/glewlwyd/start runs
/// (idempotent); `nil` when it cannot run here (tests then skip and say why).
public enum Glewlwyd {
    /// `http://127.0.0.1:4594/api/oidc` (PAR allowed, not required).
    public static let issuer: String? = {
        if let issuer = ProcessInfo.processInfo.environment["MOOSE_GLEWLWYD_ISSUER"], !issuer.isEmpty { return issuer }
        let (status, output) = runCapturingStdout(
            Fixtures.root.replacingOccurrences(of: "/Fixtures", with: "/tools/glewlwyd/start"))
        guard status == 0, let issuer = output.split(separator: "\n").last.map(String.init), issuer.hasPrefix("http")
        else { return nil }
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

extension Glewlwyd {
    /// A client-credentials access token of `moose-service` for `https://api.moose.test` (scope
    /// `api.read`) from `tokenEndpoint`, and its `token_type`; with `dpop`, bound to that key (answering
    /// Glewlwyd's nonce demand, up to three tries). Throws `SpawnError` naming what the endpoint answered.
    public static func serviceAccessToken(
        tokenEndpoint: URL, transport: any HTTPTransport,
        dpop: (signer: JWTSigner, jwk: JWK)? = nil
    ) async throws -> (token: String, type: String) {
        var nonce: String? = nil
        for _ in 0..<3 {
            var request = APIRequest(
                method: .post, url: tokenEndpoint,
                body: Data("grant_type=client_credentials&scope=api.read&resource=https%3A%2F%2Fapi.moose.test".utf8))
            request.headerFields[.contentType] = "application/x-www-form-urlencoded"
            request.headerFields[.authorization] =
                "Basic " + Data("moose-service:moose-service-secret".utf8).base64EncodedString()
            if let dpop {
                request.headerFields[.dpop] = try DPoP.proof(
                    signer: dpop.signer, publicJWK: dpop.jwk, method: "POST",
                    url: tokenEndpoint.absoluteString, nonce: nonce)
            }
            let response = try await transport.send(request)
            if response.status.code == 400, let fresh = response.headerFields[.dpopNonce] { nonce = fresh; continue }
            guard response.status.code == 200 else {
                throw SpawnError("Glewlwyd's token endpoint answered \(response.status.code)")
            }
            let body = try JSONValue(parsing: Array(response.body))
            guard let token = body["access_token"]?.stringValue else {
                throw SpawnError("Glewlwyd's token answer has no access_token")
            }
            return (token, body["token_type"]?.stringValue ?? "")
        }
        throw SpawnError("Glewlwyd asked for a new DPoP nonce three times")
    }
}
